"""``flow.nn``: convolution, activations, pooling, dropout, softmax and losses as functions of Blobs."""
from .errors import LayerError, describe_shape
from .framework.blob import Blob
from .ops.conv import conv2d as conv2d_op, standardize_data_format
from .ops.conv import avg_pool2d, bias_add, max_pool2d
from .ops.elementwise import (elu, gelu, hard_sigmoid, leaky_relu, relu, relu6, selu, sigmoid, silu, softplus,
                              softsign, tanh)
from .ops.nn import (dropout, log_softmax, sigmoid_cross_entropy_with_logits, softmax,
                     softmax_cross_entropy_with_logits, sparse_softmax_cross_entropy_with_logits)
from .ops.norm import batch_norm, layer_norm
from .ops.shape import transpose

swish = silu

# data format -> OneFlow's filter layout, and the permutation to the conv op's (kh, kw, in, out)
_FILTERS = {"NCHW": ("(out, in, kh, kw)", (2, 3, 1, 0)), "NHWC": ("(out, kh, kw, in)", (1, 2, 3, 0))}


def conv2d(input, filters, strides, padding, data_format="NCHW", dilations=None, groups=1, name=None):  # noqa: A002
    """OneFlow's ``flow.nn.conv2d``: ``filters`` laid out as in OneFlow, (out, in, kh, kw) for NCHW and
    (out, kh, kw, in) for NHWC; ``padding`` 'SAME' or 'VALID'.

        w = flow.get_variable("conv1-weight", (32, 1, 5, 5))
        y = flow.nn.conv2d(images, w, strides=1, padding="SAME")   # (N, 1, 28, 28) -> (N, 32, 28, 28)
    """
    what = f"flow.nn.conv2d({name!r})" if name else "flow.nn.conv2d"
    fmt = standardize_data_format(data_format, what)
    layout, perm = _FILTERS[fmt]
    if not isinstance(filters, Blob) or filters.ndim != 4:
        got = describe_shape(filters.shape) if isinstance(filters, Blob) else type(filters).__name__
        raise LayerError(f"{what}: filters expected a rank-4 Blob {layout} for {fmt}, received {got}")
    if groups != 1:
        raise LayerError(f"{what}: groups expected 1 (grouped convolution is not supported), received {groups!r}")
    kernel = transpose(filters, perm)
    return conv2d_op(input, kernel, strides, padding, fmt, 1 if dilations is None else dilations, name)


__all__ = ["conv2d", "avg_pool2d", "bias_add", "max_pool2d", "elu", "gelu", "hard_sigmoid", "leaky_relu", "relu",
           "relu6", "selu", "sigmoid", "silu", "swish", "softplus", "softsign", "tanh", "dropout", "log_softmax",
           "sigmoid_cross_entropy_with_logits", "softmax", "softmax_cross_entropy_with_logits",
           "sparse_softmax_cross_entropy_with_logits", "batch_norm", "layer_norm"]
