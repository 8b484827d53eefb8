"""conv3d and 3-D pooling (``flowlayers/ops/conv3d.py``).  NCDHW and NDHWC both run natively: the layout is the
convolution's dimension numbers.  Padding is TF's: 'SAME' puts the odd pad at the end."""
import functools

import jax.numpy as jnp
import numpy as np
from jax import lax

from .conv import window_counts


def _five(triple, fmt):
    return (1, 1) + tuple(triple) if fmt == "NCDHW" else (1,) + tuple(triple) + (1,)


def _spatial_axes(fmt):
    return (2, 3, 4) if fmt == "NCDHW" else (1, 2, 3)


def conv3d(node, x, w, ctx):
    a, fmt = node.attrs, node.attrs["data_format"]
    return lax.conv_general_dilated(x, w, a["strides"], a["padding"], rhs_dilation=a["dilations"],
                                    dimension_numbers=(fmt, "DHWIO", fmt))


def max_pool3d(node, x, ctx):
    a, fmt = node.attrs, node.attrs["data_format"]
    init = -np.inf if jnp.issubdtype(x.dtype, jnp.floating) else jnp.iinfo(x.dtype).min
    return lax.reduce_window(x, np.array(init, x.dtype), lax.max, _five(a["ksize"], fmt), _five(a["strides"], fmt),
                             a["padding"])


def avg_pool3d(node, x, ctx):
    """The window sums divided by each window's count of real elements: 'SAME' padding is not averaged in."""
    a, fmt = node.attrs, node.attrs["data_format"]
    sums = lax.reduce_window(x, np.array(0, x.dtype), lax.add, _five(a["ksize"], fmt), _five(a["strides"], fmt),
                             a["padding"])
    counts = functools.reduce(np.multiply.outer, [window_counts(x.shape[ax], k, s, a["padding"]) for ax, k, s in
                                                  zip(_spatial_axes(fmt), a["ksize"], a["strides"])])
    shape = (1, 1) + counts.shape if fmt == "NCDHW" else (1,) + counts.shape + (1,)
    return sums / jnp.asarray(counts.reshape(shape), x.dtype)


KERNELS = {"conv3d": conv3d, "max_pool3d": max_pool3d, "avg_pool3d": avg_pool3d}
