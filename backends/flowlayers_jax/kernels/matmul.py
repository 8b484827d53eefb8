"""matmul (``flowlayers/ops/matmul.py``)."""
import jax.numpy as jnp


def matmul(node, a, b, ctx):
    a = jnp.swapaxes(a, -1, -2) if node.attrs["transpose_a"] else a
    b = jnp.swapaxes(b, -1, -2) if node.attrs["transpose_b"] else b
    return jnp.matmul(a, b)


KERNELS = {"matmul": matmul}
