"""gather: an embedding lookup (``flowlayers/ops/embedding.py``).  XLA's SPMD partitioner takes a gather from
row-split (vocabulary-parallel) tables as it is: no one-hot product, as DTensor needs in the TF backend."""
import jax.numpy as jnp


def gather(node, table, ids, ctx):
    return jnp.take(table, ids, axis=0)


KERNELS = {"gather": gather}
