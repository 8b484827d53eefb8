"""2-D convolution, pooling and bias_add, in NCHW or NHWC (kernels are always (kh, kw, in, out))."""
from ..errors import DTypeError, LayerError, ShapeError, describe_shape
from ..framework.graph import apply
from ..framework.op_def import OpDef, Signature
from ..sbp import Split as S, broadcast as B, partial_sum as P
from . import rules

_FORMATS = {"NCHW": "NCHW", "NHWC": "NHWC", "channels_first": "NCHW", "channels_last": "NHWC"}


def standardize_data_format(value, what):
    if value not in _FORMATS:
        raise LayerError(f"{what}: data_format expected one of {list(_FORMATS)}, received {value!r}")
    return _FORMATS[value]


def standardize_padding(value, what):
    if not isinstance(value, str) or value.upper() not in ("SAME", "VALID"):
        raise LayerError(f"{what}: padding expected 'SAME' or 'VALID', received {value!r}")
    return value.upper()


def pair(value, what, name):
    return ntuple(value, 2, what, name)


def ntuple(value, n, what, name):
    """``value`` as a tuple of ``n`` positive ints: an int repeated, or a list or tuple of ``n`` of them."""
    if isinstance(value, int) and not isinstance(value, bool):
        value = (value,) * n
    value = tuple(value) if isinstance(value, (list, tuple)) else value
    if not (isinstance(value, tuple) and len(value) == n and all(
            isinstance(v, int) and not isinstance(v, bool) and v > 0 for v in value)):
        kind = {1: "a positive int", 2: "a positive int or a pair of them"}.get(n, f"a positive int or {n} of them")
        raise LayerError(f"{what}: {name} expected {kind}, received {value!r}")
    return value


def channel_axis(fmt):
    return 1 if fmt == "NCHW" else 3


def spatial_size(size, k, s, d, pad):
    """An output's size along one spatial dim of ``size``: kernel ``k``, stride ``s``, dilation ``d``."""
    if size is None:
        return None
    if pad == "SAME":
        return -(-size // s)
    out = (size - (k - 1) * d - 1) // s + 1
    if out <= 0:
        raise ShapeError(f"expected a spatial size of at least {(k - 1) * d + 1} for VALID padding, received {size}")
    return out


def _out_shape(x, fmt, channels, ksize, strides, dilations, pad):
    h_ax, w_ax = (2, 3) if fmt == "NCHW" else (1, 2)
    hw = [spatial_size(x.shape[a], k, s, d, pad) for a, k, s, d in zip((h_ax, w_ax), ksize, strides, dilations)]
    return (x.shape[0], channels, *hw) if fmt == "NCHW" else (x.shape[0], *hw, channels)


def _check_rank4(x, fmt):
    if x.ndim != 4:
        raise ShapeError(f"expected a rank-4 input ({'N, C, H, W' if fmt == 'NCHW' else 'N, H, W, C'}), "
                         f"received shape {describe_shape(x.shape)} (rank {x.ndim})")


def _check_conv_inputs(x, w, fmt, kernel_in_axis):
    """A rank-4 input of the kernel's dtype whose channels are the kernel's dim ``kernel_in_axis``."""
    _check_rank4(x, fmt)
    if x.dtype != w.dtype:
        raise DTypeError(f"expected input and kernel of one dtype, received {x.dtype} and {w.dtype}")
    cin = x.shape[channel_axis(fmt)]
    if cin is not None and cin != w.shape[kernel_in_axis]:
        raise ShapeError(f"expected {w.shape[kernel_in_axis]} input channels on axis {channel_axis(fmt)} ({fmt}), "
                         f"received shape {describe_shape(x.shape)}")


def _infer_conv(inputs, attrs):
    x, w = inputs
    fmt = attrs["data_format"]
    _check_conv_inputs(x, w, fmt, 2)
    return [(_out_shape(x, fmt, w.shape[3], w.shape[:2], attrs["strides"], attrs["dilations"], attrs["padding"]),
             x.dtype)]


def _conv_signatures(inputs, attrs):
    c = channel_axis(attrs["data_format"])
    return [Signature((S(0), B), (S(0),)),            # data parallel
            Signature((B, S(3)), (S(c),)),            # output channels split
            Signature((S(c), S(2)), (P,)),            # input channels split: partial sums
            Signature((P, B), (P,)),
            Signature((B, B), (B,))]


CONV2D = OpDef("conv2d", _infer_conv, _conv_signatures)


def conv2d(x, kernel, strides=1, padding="VALID", data_format="NCHW", dilations=1, name=None):
    """2-D convolution of ``x`` with a (kh, kw, in, out) ``kernel``; ``padding`` 'SAME' or 'VALID'."""
    what = name or "conv2d"
    attrs = {"strides": pair(strides, what, "strides"), "dilations": pair(dilations, what, "dilations"),
             "padding": standardize_padding(padding, what),
             "data_format": standardize_data_format(data_format, what)}
    return apply(CONV2D, [x, kernel], attrs, name)


def _transposed_size(size, k, s, pad):
    if size is None:
        return None
    return size * s if pad == "SAME" else (size - 1) * s + k


def _infer_conv_transpose(inputs, attrs):
    """A (kh, kw, out, in) kernel, as Keras' Conv2DTranspose holds it: the gradient of a conv2d with it."""
    x, w = inputs
    fmt = attrs["data_format"]
    _check_conv_inputs(x, w, fmt, 3)
    h_ax, w_ax = (2, 3) if fmt == "NCHW" else (1, 2)
    hw = [_transposed_size(x.shape[a], k, s, attrs["padding"])
          for a, k, s in zip((h_ax, w_ax), w.shape[:2], attrs["strides"])]
    out = (x.shape[0], w.shape[2], *hw) if fmt == "NCHW" else (x.shape[0], *hw, w.shape[2])
    return [(out, x.dtype)]


def _conv_transpose_signatures(inputs, attrs):
    c = channel_axis(attrs["data_format"])
    return [Signature((S(0), B), (S(0),)),            # data parallel
            Signature((B, S(2)), (S(c),)),            # output channels split
            Signature((S(c), S(3)), (P,)),            # input channels split: partial sums
            Signature((P, B), (P,)),
            Signature((B, B), (B,))]


CONV2D_TRANSPOSE = OpDef("conv2d_transpose", _infer_conv_transpose, _conv_transpose_signatures)


def conv2d_transpose(x, kernel, strides=1, padding="VALID", data_format="NCHW", name=None):
    """The transposed convolution of ``x`` with a (kh, kw, out, in) ``kernel`` (the gradient of ``conv2d`` with
    respect to its input); output size ``H * s`` ('SAME') or ``(H - 1) * s + kh`` ('VALID')."""
    what = name or "conv2d_transpose"
    attrs = {"strides": pair(strides, what, "strides"), "padding": standardize_padding(padding, what),
             "data_format": standardize_data_format(data_format, what)}
    return apply(CONV2D_TRANSPOSE, [x, kernel], attrs, name)


def _infer_pool(inputs, attrs):
    (x,) = inputs
    fmt = attrs["data_format"]
    _check_rank4(x, fmt)
    return [(_out_shape(x, fmt, x.shape[channel_axis(fmt)], attrs["ksize"], attrs["strides"], (1, 1),
                        attrs["padding"]), x.dtype)]


def _pool_signatures(inputs, attrs):
    return rules.batch_only(inputs, attrs, keep_axes=(0, channel_axis(attrs["data_format"])))


MAX_POOL2D = OpDef("max_pool2d", _infer_pool, _pool_signatures)
AVG_POOL2D = OpDef("avg_pool2d", _infer_pool, _pool_signatures)


def _pool(op, x, ksize, strides, padding, data_format, name):
    what = name or op.name
    strides = ksize if strides is None else strides
    attrs = {"ksize": pair(ksize, what, "ksize"), "strides": pair(strides, what, "strides"),
             "padding": standardize_padding(padding, what),
             "data_format": standardize_data_format(data_format, what)}
    return apply(op, [x], attrs, name)


def max_pool2d(input, ksize, strides=None, padding="VALID", data_format="NCHW", ceil_mode=False,  # noqa: A002
               name=None):
    """Max pooling over H and W; OneFlow 0.3-0.5's signature: ``data_format`` 'NCHW' (its default) or 'NHWC'."""
    _floor_only(ceil_mode, name or "max_pool2d")
    return _pool(MAX_POOL2D, input, ksize, strides, padding, data_format, name)


def avg_pool2d(input, ksize, strides=None, padding="VALID", data_format="NCHW", ceil_mode=False,  # noqa: A002
               name=None):
    """Average pooling over H and W (padding cells are not counted, as in TF and Keras)."""
    _floor_only(ceil_mode, name or "avg_pool2d")
    return _pool(AVG_POOL2D, input, ksize, strides, padding, data_format, name)


def _floor_only(ceil_mode, what):
    if ceil_mode is not False:
        raise LayerError(f"{what}: ceil_mode={ceil_mode!r} is not supported (output sizes are rounded down, "
                         f"as with ceil_mode=False); expected False: pad the input or use padding='SAME'")


def _infer_bias_add(inputs, attrs):
    x, b = inputs
    axis = attrs["axis"] % x.ndim
    if b.ndim != 1 or (x.shape[axis] is not None and b.shape[0] != x.shape[axis]):
        raise ShapeError(f"expected a bias of shape ({x.shape[axis]},) for axis {axis} of "
                         f"{describe_shape(x.shape)}, received {describe_shape(b.shape)}")
    if x.dtype != b.dtype:
        raise DTypeError(f"expected input and bias of one dtype, received {x.dtype} and {b.dtype}")
    return [(x.shape, x.dtype)]


def _bias_add_signatures(inputs, attrs):
    x, _ = inputs
    axis = attrs["axis"] % x.ndim
    sigs = [Signature((S(k), B), (S(k),)) for k in range(x.ndim) if k != axis]
    return sigs + [Signature((S(axis), S(0)), (S(axis),)), Signature((B, B), (B,))]


BIAS_ADD = OpDef("bias_add", _infer_bias_add, _bias_add_signatures)


def bias_add(x, bias, axis=-1, name=None):
    """``x + bias`` with the 1-D ``bias`` laid along ``axis`` of ``x``."""
    return apply(BIAS_ADD, [x, bias], {"axis": axis % x.ndim}, name)
