"""3-D convolution and pooling over (D, H, W), in NDHWC or NCDHW; kernels are (kd, kh, kw, in, out)."""
from ..errors import DTypeError, LayerError, ShapeError, describe_shape
from ..framework.graph import apply
from ..framework.op_def import OpDef, Signature
from ..sbp import Split as S, broadcast as B, partial_sum as P
from . import rules
from .conv import ntuple, spatial_size, standardize_padding

_FORMATS = {"NCDHW": "NCDHW", "NDHWC": "NDHWC", "channels_first": "NCDHW", "channels_last": "NDHWC"}


def standardize_data_format(value, what):
    if value not in _FORMATS:
        raise LayerError(f"{what}: data_format expected one of {list(_FORMATS)}, received {value!r}")
    return _FORMATS[value]


def channel_axis(fmt):
    return 1 if fmt == "NCDHW" else 4


def spatial_axes(fmt):
    return (2, 3, 4) if fmt == "NCDHW" else (1, 2, 3)


def _out_shape(x, fmt, channels, ksize, strides, dilations, pad):
    dhw = [spatial_size(x.shape[a], k, s, d, pad) for a, k, s, d in zip(spatial_axes(fmt), ksize, strides, dilations)]
    return (x.shape[0], channels, *dhw) if fmt == "NCDHW" else (x.shape[0], *dhw, channels)


def _check_rank5(x, fmt):
    if x.ndim != 5:
        raise ShapeError(f"expected a rank-5 input ({'N, C, D, H, W' if fmt == 'NCDHW' else 'N, D, H, W, C'}), "
                         f"received shape {describe_shape(x.shape)} (rank {x.ndim})")


def _infer_conv(inputs, attrs):
    x, w = inputs
    fmt = attrs["data_format"]
    _check_rank5(x, fmt)
    if x.dtype != w.dtype:
        raise DTypeError(f"expected input and kernel of one dtype, received {x.dtype} and {w.dtype}")
    cin = x.shape[channel_axis(fmt)]
    if w.ndim != 5 or (cin is not None and cin != w.shape[3]):
        raise ShapeError(f"expected a (kd, kh, kw, {cin}, out) kernel for input {describe_shape(x.shape)} ({fmt}), "
                         f"received {describe_shape(w.shape)}")
    return [(_out_shape(x, fmt, w.shape[4], w.shape[:3], attrs["strides"], attrs["dilations"], attrs["padding"]),
             x.dtype)]


def _conv_signatures(inputs, attrs):
    c = channel_axis(attrs["data_format"])
    return [Signature((S(0), B), (S(0),)),            # data parallel
            Signature((B, S(4)), (S(c),)),            # output channels split
            Signature((S(c), S(3)), (P,)),            # input channels split: partial sums
            Signature((P, B), (P,)),
            Signature((B, B), (B,))]


CONV3D = OpDef("conv3d", _infer_conv, _conv_signatures)


def conv3d(x, kernel, strides=1, padding="VALID", data_format="NDHWC", dilations=1, name=None):
    """3-D convolution of ``x`` with a (kd, kh, kw, in, out) ``kernel``; ``padding`` 'SAME' or 'VALID'."""
    what = name or "conv3d"
    attrs = {"strides": ntuple(strides, 3, what, "strides"), "dilations": ntuple(dilations, 3, what, "dilations"),
             "padding": standardize_padding(padding, what),
             "data_format": standardize_data_format(data_format, what)}
    return apply(CONV3D, [x, kernel], attrs, name)


def _infer_pool(inputs, attrs):
    (x,) = inputs
    fmt = attrs["data_format"]
    _check_rank5(x, fmt)
    return [(_out_shape(x, fmt, x.shape[channel_axis(fmt)], attrs["ksize"], attrs["strides"], (1, 1, 1),
                        attrs["padding"]), x.dtype)]


def _pool_signatures(inputs, attrs):
    return rules.batch_only(inputs, attrs, keep_axes=(0, channel_axis(attrs["data_format"])))


MAX_POOL3D = OpDef("max_pool3d", _infer_pool, _pool_signatures)
AVG_POOL3D = OpDef("avg_pool3d", _infer_pool, _pool_signatures)


def _pool(op, x, ksize, strides, padding, data_format, name):
    what = name or op.name
    attrs = {"ksize": ntuple(ksize, 3, what, "ksize"),
             "strides": ntuple(ksize if strides is None else strides, 3, what, "strides"),
             "padding": standardize_padding(padding, what),
             "data_format": standardize_data_format(data_format, what)}
    return apply(op, [x], attrs, name)


def max_pool3d(x, ksize, strides=None, padding="VALID", data_format="NDHWC", name=None):
    """Max pooling over D, H and W."""
    return _pool(MAX_POOL3D, x, ksize, strides, padding, data_format, name)


def avg_pool3d(x, ksize, strides=None, padding="VALID", data_format="NDHWC", name=None):
    """Average pooling over D, H and W ('SAME' padding cells are not counted, as in TF and Keras)."""
    return _pool(AVG_POOL3D, x, ksize, strides, padding, data_format, name)
