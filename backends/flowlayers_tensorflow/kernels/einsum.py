"""einsum (``flowlayers/ops/einsum.py``)."""
import tensorflow as tf


def einsum(node, *operands, ctx):
    return tf.einsum(node.attrs["equation"], *operands)


KERNELS = {"einsum": einsum}
