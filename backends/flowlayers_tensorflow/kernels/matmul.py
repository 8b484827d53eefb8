"""matmul (``flowlayers/ops/matmul.py``)."""
import tensorflow as tf


def matmul(node, a, b, ctx):
    return tf.linalg.matmul(a, b, transpose_a=node.attrs["transpose_a"], transpose_b=node.attrs["transpose_b"])


KERNELS = {"matmul": matmul}
