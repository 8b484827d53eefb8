"""depthwise_conv2d (``flowlayers/ops/depthwise.py``), NHWC on CPUs as the 2-D convolutions are.

DTensor (TF 2.21) has no layout rule for DepthwiseConv2dNativeBackpropFilter: in the consistent view the kernel
is spread into a block-diagonal (kh, kw, in, in * multiplier) one and run as a plain convolution, whose gradients
DTensor expands (``in`` times the arithmetic, the same values).
"""
import numpy as np
import tensorflow as tf

from .conv import nhwc, spread_kernel


def _four(pair, fmt):
    return (1, 1) + tuple(pair) if fmt == "NCHW" else (1,) + tuple(pair) + (1,)


def _block_diagonal(w, ctx):
    """(kh, kw, c, m) -> (kh, kw, c, c * m), zero but where input channel c meets its own outputs."""
    kh, kw, c, m = w.shape
    eye = ctx.constant(np.eye(c, dtype=w.dtype.as_numpy_dtype), w.dtype)
    return tf.reshape(tf.einsum("pqcm,dc->pqdcm", w, eye), (kh, kw, c, c * m))


def depthwise_conv2d(node, x, w, ctx):
    a = node.attrs
    dilations = a["dilations"]
    if max(dilations) > 1:      # tf.nn.depthwise_conv2d dilates by space_to_batch: the spread kernel instead
        w, dilations = spread_kernel(w, dilations), (1, 1)
    if ctx.input_sbp(node, 0) is not None:      # the consistent view: DTensor
        full = _block_diagonal(w, ctx)
        return nhwc(lambda t, fmt: tf.nn.conv2d(t, full, _four(a["strides"], fmt), a["padding"], data_format=fmt),
                    x, a["data_format"], ctx)
    return nhwc(lambda t, fmt: tf.nn.depthwise_conv2d(t, w, _four(a["strides"], fmt), a["padding"],
                                                      data_format=fmt), x, a["data_format"], ctx)


KERNELS = {"depthwise_conv2d": depthwise_conv2d}
