"""Batch and layer normalisation (``flowlayers/ops/norm.py``)."""
from types import SimpleNamespace

import jax.numpy as jnp
from jax import lax

from flowlayers import backend_common


def _moments(x, axes, keepdims=False, rows=None):
    """tf.nn.moments: the mean, then the mean squared deviation from it (the mean held constant there: its
    gradient through the deviations sums to zero).  Half-precision inputs are reduced in float32.  ``rows``: the
    real rows of a padded replica (mirrored view): the others are left out."""
    y = x.astype(jnp.float32) if x.dtype in (jnp.float16, jnp.bfloat16) else x
    where = None if rows is None or 0 not in axes else jnp.broadcast_to(rows.reshape((-1,) + (1,) * (y.ndim - 1)),
                                                                         y.shape)
    if where is not None and y.shape[0]:
        where = where | ~jnp.any(rows)      # a replica without rows: any finite statistics (its updates are dropped)
    mean = jnp.mean(y, axis=axes, keepdims=True, where=where)
    var = jnp.mean(jnp.square(y - lax.stop_gradient(mean)), axis=axes, keepdims=True, where=where)
    if not keepdims:
        mean, var = jnp.squeeze(mean, axes), jnp.squeeze(var, axes)
    return mean.astype(x.dtype), var.astype(x.dtype)


#: ``backend_common.batch_norm`` and ``layer_norm``'s namespace: the normalisations written once, over these
NORM_MATH = SimpleNamespace(
    batch_moments=lambda x, axes, ctx: _moments(x, tuple(axes), rows=ctx.rows),
    moments=lambda x, axes: _moments(x, tuple(axes), keepdims=True),
    rsqrt=lax.rsqrt, reshape=jnp.reshape, identity=lambda v: v)


def batch_norm(node, x, gamma, beta, mean, var, ctx):
    return backend_common.batch_norm(NORM_MATH, node, x, gamma, beta, mean, var, ctx)


def layer_norm(node, x, gamma, beta, ctx):
    return backend_common.layer_norm(NORM_MATH, node, x, gamma, beta, ctx)


KERNELS = {"batch_norm": batch_norm, "layer_norm": layer_norm}
