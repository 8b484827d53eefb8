"""depthwise_conv2d (``flowlayers/ops/depthwise.py``): the sum over the kernel's taps of a strided slice of the
(padded) input times that tap's (in, multiplier) weights.

Not a grouped ``conv_general_dilated``: XLA's SPMD partitioner (jax 0.10) computes the kernel gradient of one
(a ``batch_group_count`` convolution) wrongly when the batch is split over one axis of a 2-D mesh and replicated
over the other; slices, products and sums it partitions exactly, and a depthwise convolution is memory-bound anyway.
"""
import jax.numpy as jnp
from jax import lax


def depthwise_conv2d(node, x, w, ctx):
    a, fmt = node.attrs, node.attrs["data_format"]
    kh, kw, cin, mult = w.shape
    axes = (2, 3) if fmt == "NCHW" else (1, 2)
    (sh, sw), (dh, dw) = a["strides"], a["dilations"]
    out = [node.outputs[0].shape[ax] for ax in axes]
    pads = lax.padtype_to_pads([x.shape[ax] for ax in axes], ((kh - 1) * dh + 1, (kw - 1) * dw + 1), (sh, sw),
                               a["padding"])
    widths = [(0, 0)] * x.ndim
    widths[axes[0]], widths[axes[1]] = pads
    x = jnp.pad(x, widths)
    total = None
    for p in range(kh):
        for q in range(kw):
            start = [0] * x.ndim
            limit = list(x.shape)
            step = [1] * x.ndim
            for ax, offset, size, stride in ((axes[0], p * dh, out[0], sh), (axes[1], q * dw, out[1], sw)):
                start[ax], limit[ax], step[ax] = offset, offset + (size - 1) * stride + 1, stride
            patch = lax.slice(x, start, limit, step)
            tap = _times(patch, w[p, q], fmt)
            total = tap if total is None else total + tap
    shape = list(total.shape)
    if fmt == "NCHW":       # (N, C, M, H, W) -> (N, C * M, H, W)
        return jnp.reshape(total, [shape[0], cin * mult] + shape[3:])
    return jnp.reshape(total, shape[:3] + [cin * mult])


def _times(patch, weights, fmt):
    """A patch (N, H, W, C) times its tap's (C, M) weights: (N, H, W, C, M) (channels first: (N, C, M, H, W))."""
    if fmt == "NCHW":
        return patch[:, :, None] * weights[None, :, :, None, None]
    return patch[..., None] * weights


KERNELS = {"depthwise_conv2d": depthwise_conv2d}
