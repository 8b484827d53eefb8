"""conv2d, pooling, bias_add (``flowlayers/ops/conv.py``).  NCHW and NHWC both run natively: the layout is the
convolution's dimension numbers, no transposes.  Padding is TF's: 'SAME' puts the odd pad at the end."""
import jax.numpy as jnp
import numpy as np
from jax import lax


def _spatial_axes(fmt):
    return (2, 3) if fmt == "NCHW" else (1, 2)


def _four(pair, fmt):
    return (1, 1) + tuple(pair) if fmt == "NCHW" else (1,) + tuple(pair) + (1,)


def conv2d(node, x, w, ctx):
    a, fmt = node.attrs, node.attrs["data_format"]
    return lax.conv_general_dilated(x, w, a["strides"], a["padding"], rhs_dilation=a["dilations"],
                                    dimension_numbers=(fmt, "HWIO", fmt))


def _same_pad_before(size, k, s, out):
    """What TF's 'SAME' pads before a conv2d of ``size`` into ``out`` (the odd one goes after)."""
    return max((out - 1) * s + k - size, 0) // 2


def conv2d_transpose(node, x, w, ctx):
    """The gradient of a conv2d of the output's shape with the (kh, kw, out, in) kernel ``w``, as TF's: the
    input dilated by the strides and convolved, unit stride, with the kernel flipped."""
    a, fmt = node.attrs, node.attrs["data_format"]
    pads = []
    for ax, k, s in zip(_spatial_axes(fmt), w.shape[:2], a["strides"]):
        size, out = node.outputs[0].shape[ax], x.shape[ax]     # the forward conv: size -> out (= x's)
        before = k - 1 - (_same_pad_before(size, k, s, out) if a["padding"] == "SAME" else 0)
        pads.append((before, size + k - 1 - ((out - 1) * s + 1) - before))
    return lax.conv_general_dilated(x, w[::-1, ::-1], (1, 1), pads, lhs_dilation=a["strides"],
                                    dimension_numbers=(fmt, "HWOI", fmt))


def max_pool2d(node, x, ctx):
    a, fmt = node.attrs, node.attrs["data_format"]
    # a concrete identity (numpy, not traced): lax then takes its max-pool primitive, which has a gradient
    init = -np.inf if jnp.issubdtype(x.dtype, jnp.floating) else jnp.iinfo(x.dtype).min
    return lax.reduce_window(x, np.array(init, x.dtype), lax.max, _four(a["ksize"], fmt), _four(a["strides"], fmt),
                             a["padding"])


def window_counts(size, k, s, padding):
    """Real (unpadded) elements under each window along one spatial dim, as TF pads for 'SAME'."""
    out = -(-size // s) if padding == "SAME" else (size - k) // s + 1
    before = _same_pad_before(size, k, s, out) if padding == "SAME" else 0
    return np.array([min(i * s - before + k, size) - max(i * s - before, 0) for i in range(out)], np.float32)


def avg_pool2d(node, x, ctx):
    """The window sums divided by each window's count of real elements: 'SAME' padding is not averaged in."""
    a, fmt = node.attrs, node.attrs["data_format"]
    sums = lax.reduce_window(x, np.array(0, x.dtype), lax.add, _four(a["ksize"], fmt), _four(a["strides"], fmt),
                             a["padding"])
    (h, wd), (kh, kw), (sh, sw) = [x.shape[i] for i in _spatial_axes(fmt)], a["ksize"], a["strides"]
    counts = np.outer(window_counts(h, kh, sh, a["padding"]), window_counts(wd, kw, sw, a["padding"]))
    shape = (1, 1) + counts.shape if fmt == "NCHW" else (1,) + counts.shape + (1,)
    return sums / jnp.asarray(counts.reshape(shape), x.dtype)


def bias_add(node, x, b, ctx):
    shape = [1] * len(x.shape)
    shape[node.attrs["axis"]] = -1      # the op keeps axis in [0, rank)
    return x + jnp.reshape(b, shape)


KERNELS = {"conv2d": conv2d, "conv2d_transpose": conv2d_transpose, "max_pool2d": max_pool2d,
           "avg_pool2d": avg_pool2d, "bias_add": bias_add}
