"""cumsum, cumprod, sort, argsort, top_k (``flowlayers/ops/along_axis.py``)."""
import jax.numpy as jnp
from jax import lax


def _along(fn):
    def kernel(node, x, ctx):
        return fn(x, axis=node.attrs["axis"]).astype(x.dtype)      # jnp.cumsum widens int32 under x64
    return kernel


def argsort(node, x, ctx):
    return jnp.argsort(x, axis=node.attrs["axis"], stable=True).astype(jnp.int32)


def top_k(node, x, ctx):
    values, indices = lax.top_k(x, node.attrs["k"])
    return values, indices.astype(jnp.int32)


KERNELS = {"cumsum": _along(jnp.cumsum), "cumprod": _along(jnp.cumprod), "sort": _along(jnp.sort),
           "argsort": argsort, "top_k": top_k}
