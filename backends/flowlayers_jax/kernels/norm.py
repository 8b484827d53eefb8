"""Batch and layer normalisation (``flowlayers/ops/norm.py``)."""
import jax.numpy as jnp
from jax import lax


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


def batch_norm(node, x, gamma, beta, mean, var, ctx):
    a = node.attrs
    axis, rank = a["axis"], len(x.shape)
    shape = [1] * rank
    shape[axis] = -1
    if ctx.training(a["training"]):
        batch_mean, batch_var = _moments(x, tuple(i for i in range(rank) if i != axis), rows=ctx.rows)
        m = a["momentum"]
        new_mean = mean * m + batch_mean * (1.0 - m)
        new_var = var * m + batch_var * (1.0 - m)
        use_mean, use_var = batch_mean, batch_var
    else:
        new_mean, new_var = mean, var
        use_mean, use_var = mean, var
    inv = lax.rsqrt(jnp.reshape(use_var, shape) + a["epsilon"]) * jnp.reshape(gamma, shape)
    y = (x - jnp.reshape(use_mean, shape)) * inv + jnp.reshape(beta, shape)
    return y, new_mean, new_var


def layer_norm(node, x, gamma, beta, ctx):
    axes = tuple(node.attrs["axes"])
    mean, var = _moments(x, axes, keepdims=True)
    shape = [x.shape[i] if i in axes else 1 for i in range(len(x.shape))]
    y = (x - mean) * lax.rsqrt(var + node.attrs["epsilon"])
    return y * jnp.reshape(gamma, shape) + jnp.reshape(beta, shape)


KERNELS = {"batch_norm": batch_norm, "layer_norm": layer_norm}
