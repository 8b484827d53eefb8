"""Reductions."""
import jax.numpy as jnp


def _reduce(fn):
    def kernel(node, x, ctx):
        # in the input's dtype: jnp.sum and jnp.prod widen int32 to int64 under jax_enable_x64
        return fn(x, axis=tuple(node.attrs["axes"]), keepdims=node.attrs["keepdims"]).astype(x.dtype)
    return kernel


def _arg(fn):
    # JAX's default integer: int64 under jax_enable_x64, int32 otherwise (int64 arrays then do not exist)
    def kernel(node, x, ctx):
        return fn(x, axis=node.attrs["axes"][0])
    return kernel


def _sum(x, axis, keepdims):
    """In the input's dtype, as the op infers (jnp.sum would widen int32 to int64 under jax_enable_x64)."""
    return jnp.sum(x, axis=axis, keepdims=keepdims, dtype=x.dtype)


KERNELS = {"reduce_sum": _reduce(_sum), "reduce_mean": _reduce(jnp.mean), "reduce_max": _reduce(jnp.max),
           "reduce_min": _reduce(jnp.min), "reduce_prod": _reduce(jnp.prod), "reduce_any": _reduce(jnp.any),
           "reduce_all": _reduce(jnp.all), "argmax": _arg(jnp.argmax), "argmin": _arg(jnp.argmin)}
