"""einsum (``flowlayers/ops/einsum.py``)."""
import jax.numpy as jnp


def einsum(node, *operands, ctx):
    return jnp.einsum(node.attrs["equation"], *operands)


KERNELS = {"einsum": einsum}
