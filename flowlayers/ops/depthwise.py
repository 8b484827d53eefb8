"""Depthwise 2-D convolution: each input channel convolved with its own ``depth_multiplier`` filters, a
(kh, kw, in, multiplier) kernel; output channel ``c * multiplier + m`` (Keras' and TF's order)."""
from ..errors import DTypeError, ShapeError, describe_shape
from ..framework.graph import apply
from ..framework.op_def import OpDef, Signature
from ..sbp import Split as S, broadcast as B, partial_sum as P
from .conv import _check_rank4, _out_shape, channel_axis, pair, standardize_data_format, standardize_padding


def _infer(inputs, attrs):
    x, w = inputs
    fmt = attrs["data_format"]
    _check_rank4(x, fmt)
    if x.dtype != w.dtype:
        raise DTypeError(f"expected input and kernel of one dtype, received {x.dtype} and {w.dtype}")
    cin = x.shape[channel_axis(fmt)]
    if w.ndim != 4 or (cin is not None and cin != w.shape[2]):
        raise ShapeError(f"expected a (kh, kw, {cin}, multiplier) kernel for input {describe_shape(x.shape)} "
                         f"({fmt}), received {describe_shape(w.shape)}")
    return [(_out_shape(x, fmt, w.shape[2] * w.shape[3], w.shape[:2], attrs["strides"], attrs["dilations"],
                        attrs["padding"]), x.dtype)]


def _signatures(inputs, attrs):
    """Channels split with their filters: a device's channels give a contiguous block of the output's."""
    c = channel_axis(attrs["data_format"])
    return [Signature((S(0), B), (S(0),)),
            Signature((S(c), S(2)), (S(c),)),
            Signature((P, B), (P,)),
            Signature((B, B), (B,))]


DEPTHWISE_CONV2D = OpDef("depthwise_conv2d", _infer, _signatures)


def depthwise_conv2d(x, kernel, strides=1, padding="VALID", data_format="NHWC", dilations=1, name=None):
    """Depthwise convolution of ``x`` with a (kh, kw, in, multiplier) ``kernel``; 'SAME' or 'VALID'."""
    what = name or "depthwise_conv2d"
    attrs = {"strides": pair(strides, what, "strides"), "dilations": pair(dilations, what, "dilations"),
             "padding": standardize_padding(padding, what),
             "data_format": standardize_data_format(data_format, what)}
    return apply(DEPTHWISE_CONV2D, [x, kernel], attrs, name)
