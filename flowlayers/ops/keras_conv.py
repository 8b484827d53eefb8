"""Keras 3's ``ops.conv``, ``ops.max_pool`` and ``ops.average_pool`` for 1-D and 2-D inputs, on Blobs.

They build ``conv.py``'s 2-D ops (a 1-D input is a 2-D one of height 1), with Keras' arguments: a kernel laid out
``(spatial..., in, out)``, padding "valid" or "same", ``data_format`` "channels_last" (default) or
"channels_first".  3-D inputs, and numpy inputs (no convolution is computed on the host), are refused by name.
"""
from ..errors import GraphError, ShapeError, describe_shape
from .conv import avg_pool2d, conv2d, max_pool2d, standardize_data_format
from .dispatch import blob, promoted, symbolic
from .keras_arrays import reshape


def _format(data_format, what):
    return standardize_data_format("channels_last" if data_format is None else data_format, what)


def _as_2d(x, fmt, what):
    """``x`` with a height of 1 where it is 1-D, and whether it was."""
    if x.ndim not in (3, 4):
        raise ShapeError(f"flow.ops.{what}: expected a 3-D (1-D convolution) or 4-D (2-D) input, received shape "
                         f"{describe_shape(x.shape)}; 3-D convolutions are not supported by flowlayers")
    if x.ndim == 4:
        return x, False
    n = x.shape[0]
    return reshape(x, (n, x.shape[1], 1, x.shape[2]) if fmt == "NCHW" else (n, 1) + x.shape[1:]), True


def _back_to_1d(y, fmt):
    n = y.shape[0]
    return reshape(y, (n, y.shape[1], y.shape[3]) if fmt == "NCHW" else (n, y.shape[2], y.shape[3]))


def _pair(value, one_d):
    value = (value,) if isinstance(value, int) else tuple(value)
    return (1,) + value if one_d else value * (2 // len(value))


def _symbolic_only(what, *values):
    if not symbolic(*values):
        raise GraphError(f"flow.ops.{what}: expected a Blob (inside a layer's call), received only numbers or "
                         f"arrays; flowlayers computes convolutions in the graph only")


def conv(inputs, kernel, strides=1, padding="valid", data_format=None, dilation_rate=1):
    """Keras' ``ops.conv``: a 1-D or 2-D convolution, ``kernel`` of shape ``(spatial..., in, out)``."""
    _symbolic_only("conv", inputs, kernel)
    x, w = promoted(inputs, kernel)
    fmt = _format(data_format, "flow.ops.conv")
    x, one_d = _as_2d(x, fmt, "conv")
    if one_d:
        w = reshape(w, (1,) + w.shape)
    y = conv2d(x, w, _pair(strides, one_d), padding, fmt, _pair(dilation_rate, one_d), name=None)
    return _back_to_1d(y, fmt) if one_d else y


def _pool(op, what):
    def fn(inputs, pool_size, strides=None, padding="valid", data_format=None):
        _symbolic_only(what, inputs)
        fmt = _format(data_format, f"flow.ops.{what}")
        x, one_d = _as_2d(blob(inputs), fmt, what)
        strides = pool_size if strides is None else strides
        y = op(x, _pair(pool_size, one_d), _pair(strides, one_d), padding, fmt)
        return _back_to_1d(y, fmt) if one_d else y
    fn.__name__ = fn.__qualname__ = what
    fn.__doc__ = (f"Keras' ``ops.{what}(inputs, pool_size, strides=None, padding='valid', data_format=None)``, "
                  f"1-D or 2-D.")
    return fn


max_pool = _pool(max_pool2d, "max_pool")
average_pool = _pool(avg_pool2d, "average_pool")
