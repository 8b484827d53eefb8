"""conv2d, pooling, bias_add (``flowlayers/ops/conv.py``).  NCHW runs natively on GPUs; on CPUs, whose TF kernels
take NHWC only, it is transposed around the op (XLA fuses the transposes)."""
import numpy as np
import tensorflow as tf


def nhwc(fn, x, fmt, ctx):
    """Run ``fn(x, tf_format)`` in the layout the device supports, returning ``fmt``."""
    if fmt == "NHWC" or ctx.native_nchw:
        return fn(x, fmt)
    y = fn(tf.transpose(x, (0, 2, 3, 1)), "NHWC")
    return tf.transpose(y, (0, 3, 1, 2))


def _four(pair, fmt):
    return (1, 1) + tuple(pair) if fmt == "NCHW" else (1,) + tuple(pair) + (1,)


def spread_kernel(w, dilations):
    """A (kh, kw, in, out) kernel with ``d - 1`` zeros between its taps: the dilated convolution as a plain one."""
    (dh, dw), (kh, kw, cin, cout) = dilations, w.shape
    w = tf.pad(tf.reshape(w, (kh, 1, kw, 1, cin, cout)), [[0, 0], [0, dh - 1], [0, 0], [0, dw - 1], [0, 0], [0, 0]])
    return tf.reshape(w, (kh * dh, kw * dw, cin, cout))[:(kh - 1) * dh + 1, :(kw - 1) * dw + 1]


def conv2d(node, x, w, ctx):
    a = node.attrs
    dilations = a["dilations"]
    if max(dilations) > 1 and not ctx.native_nchw:
        # TF's CPU Conv2D gradient kernels reject dilations > 1 (tf.nn.convolution's space_to_batch route has
        # no DTensor layout rule): on CPUs convolve with the spread-out kernel instead, the same convolution
        w, dilations = spread_kernel(w, dilations), (1, 1)
    return nhwc(lambda t, fmt: tf.nn.conv2d(t, w, _four(a["strides"], fmt), a["padding"], data_format=fmt,
                                             dilations=_four(dilations, fmt)), x, a["data_format"], ctx)


def conv2d_transpose(node, x, w, ctx):
    a, out = node.attrs, node.outputs[0].shape

    def run(t, fmt):
        h, wd = (out[2], out[3]) if a["data_format"] == "NCHW" else (out[1], out[2])
        shape = [tf.shape(t)[0], h, wd, w.shape[2]] if fmt == "NHWC" else [tf.shape(t)[0], w.shape[2], h, wd]
        return tf.nn.conv2d_transpose(t, w, tf.stack(shape), _four(a["strides"], fmt), a["padding"], data_format=fmt)
    return nhwc(run, x, a["data_format"], ctx)


def max_pool2d(node, x, ctx):
    a = node.attrs
    return nhwc(lambda t, fmt: tf.nn.max_pool2d(t, _four(a["ksize"], fmt), _four(a["strides"], fmt),
                                                 a["padding"], data_format=fmt), x, a["data_format"], ctx)


def avg_pool2d(node, x, ctx):
    a = node.attrs

    def pool(t, fmt):
        args = (t, _four(a["ksize"], fmt), _four(a["strides"], fmt), a["padding"])
        if getattr(ctx, "no_avg_pool_grad", False):
            return _avg_pool_by_conv(*args, fmt, ctx)
        return tf.nn.avg_pool2d(*args, data_format=fmt)
    return nhwc(pool, x, a["data_format"], ctx)


def window_counts(size, k, s, padding):
    """Real (unpadded) elements under each window along one spatial dim, as TF pads for 'SAME'."""
    out = -(-size // s) if padding == "SAME" else (size - k) // s + 1
    before = max((out - 1) * s + k - size, 0) // 2 if padding == "SAME" else 0
    return np.array([min(i * s - before + k, size) - max(i * s - before, 0) for i in range(out)], np.float32)


def _avg_pool_by_conv(t, ksize, strides, padding, data_format, ctx):
    """Average pooling as a per-channel identity convolution divided by each window's element count.

    DTensor (TF 2.21) has no layout rule for AvgPoolGrad ("does not implement layout propagation"); the
    gradient of a convolution with a replicated filter it does expand.
    """
    c_axis = 1 if data_format == "NCHW" else 3
    h_axis, w_axis = (2, 3) if data_format == "NCHW" else (1, 2)
    kh, kw = ksize[h_axis], ksize[w_axis]
    c = t.shape[c_axis]
    eye = np.broadcast_to(np.eye(c, dtype=t.dtype.as_numpy_dtype), (kh, kw, c, c))
    sums = tf.nn.conv2d(t, ctx.constant(np.ascontiguousarray(eye), t.dtype), strides, padding,
                        data_format=data_format)
    counts = np.outer(window_counts(t.shape[h_axis], kh, strides[h_axis], padding),
                      window_counts(t.shape[w_axis], kw, strides[w_axis], padding))
    shape = (1, 1) + counts.shape if data_format == "NCHW" else (1,) + counts.shape + (1,)
    return sums / ctx.constant(counts.reshape(shape).astype(t.dtype.as_numpy_dtype), t.dtype)


def bias_add(node, x, b, ctx):
    axis, rank = node.attrs["axis"], len(x.shape)    # the op keeps axis in [0, rank)
    # one BiasAdd (and one BiasAddGrad), which Grappler fuses into the matmul or conv before it; a broadcast add
    # is a reshape, an add and five ops of gradient, each expanded by DTensor
    if axis == rank - 1:
        return tf.nn.bias_add(x, b)
    if axis == 1 and rank == 4:
        return tf.nn.bias_add(x, b, data_format="NCHW")
    shape = [1] * rank
    shape[axis] = -1
    return x + tf.reshape(b, shape)


KERNELS = {"conv2d": conv2d, "conv2d_transpose": conv2d_transpose, "max_pool2d": max_pool2d,
           "avg_pool2d": avg_pool2d, "bias_add": bias_add}
