"""conv3d and 3-D pooling (``flowlayers/ops/conv3d.py``).  NCDHW runs natively on GPUs; on CPUs, whose TF kernels
take NDHWC only, it is transposed around the op."""
import functools

import numpy as np
import tensorflow as tf

from .conv import window_counts


def _ndhwc(fn, x, fmt, ctx):
    """Run ``fn(x, tf_format)`` in the layout the device supports, returning ``fmt``."""
    if fmt == "NDHWC" or ctx.native_nchw:
        return fn(x, fmt)
    return tf.transpose(fn(tf.transpose(x, (0, 2, 3, 4, 1)), "NDHWC"), (0, 4, 1, 2, 3))


def _five(triple, fmt):
    return (1, 1) + tuple(triple) if fmt == "NCDHW" else (1,) + tuple(triple) + (1,)


def _spread_kernel(w, dilations):
    """A (kd, kh, kw, in, out) kernel with ``d - 1`` zeros between its taps: the dilated convolution as a plain
    one (TF's CPU Conv3D takes no dilations)."""
    (dd, dh, dw), (kd, kh, kw, cin, cout) = dilations, w.shape
    w = tf.pad(tf.reshape(w, (kd, 1, kh, 1, kw, 1, cin, cout)),
               [[0, 0], [0, dd - 1], [0, 0], [0, dh - 1], [0, 0], [0, dw - 1], [0, 0], [0, 0]])
    w = tf.reshape(w, (kd * dd, kh * dh, kw * dw, cin, cout))
    return w[:(kd - 1) * dd + 1, :(kh - 1) * dh + 1, :(kw - 1) * dw + 1]


def conv3d(node, x, w, ctx):
    a = node.attrs
    dilations = a["dilations"]
    if max(dilations) > 1 and not ctx.native_nchw:
        w, dilations = _spread_kernel(w, dilations), (1, 1, 1)
    return _ndhwc(lambda t, fmt: tf.nn.conv3d(t, w, _five(a["strides"], fmt), a["padding"], data_format=fmt,
                                              dilations=_five(dilations, fmt)), x, a["data_format"], ctx)


def max_pool3d(node, x, ctx):
    a = node.attrs
    return _ndhwc(lambda t, fmt: tf.nn.max_pool3d(t, _five(a["ksize"], fmt), _five(a["strides"], fmt),
                                                  a["padding"], data_format=fmt), x, a["data_format"], ctx)


def avg_pool3d(node, x, ctx):
    a = node.attrs

    def pool(t, fmt):
        args = (t, _five(a["ksize"], fmt), _five(a["strides"], fmt), a["padding"])
        if getattr(ctx, "no_avg_pool_grad", False):
            return _avg_pool_by_conv(*args, fmt, ctx)
        return tf.nn.avg_pool3d(*args, data_format=fmt)
    return _ndhwc(pool, x, a["data_format"], ctx)


def _avg_pool_by_conv(t, ksize, strides, padding, fmt, ctx):
    """Average pooling as a per-channel identity convolution divided by each window's count of real elements
    (DTensor has no layout rule for AvgPool3DGrad; the gradient of a convolution with a replicated filter it
    expands)."""
    spatial = (2, 3, 4) if fmt == "NCDHW" else (1, 2, 3)
    c = t.shape[1 if fmt == "NCDHW" else 4]
    k = [ksize[i] for i in spatial]
    eye = np.broadcast_to(np.eye(c, dtype=t.dtype.as_numpy_dtype), (*k, c, c))
    sums = tf.nn.conv3d(t, ctx.constant(np.ascontiguousarray(eye), t.dtype), strides, padding, data_format=fmt)
    counts = functools.reduce(np.multiply.outer, [window_counts(t.shape[i], ksize[i], strides[i], padding)
                                                  for i in spatial])
    shape = (1, 1) + counts.shape if fmt == "NCDHW" else (1,) + counts.shape + (1,)
    return sums / ctx.constant(counts.reshape(shape).astype(t.dtype.as_numpy_dtype), t.dtype)


KERNELS = {"conv3d": conv3d, "max_pool3d": max_pool3d, "avg_pool3d": avg_pool3d}
