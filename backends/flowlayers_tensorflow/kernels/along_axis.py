"""cumsum, cumprod, sort, argsort, top_k (``flowlayers/ops/along_axis.py``)."""
import tensorflow as tf

from .reduce import inclusive_product


def cumsum(node, x, ctx):
    return tf.cumsum(x, axis=node.attrs["axis"])


def cumprod(node, x, ctx):
    return inclusive_product(x, node.attrs["axis"])      # DTensor has no layout rule for tf.math.cumprod


def sort(node, x, ctx):
    return tf.sort(x, axis=node.attrs["axis"])


def argsort(node, x, ctx):
    return tf.argsort(x, axis=node.attrs["axis"], stable=True)


def top_k(node, x, ctx):
    values, indices = tf.math.top_k(x, node.attrs["k"])
    return values, tf.cast(indices, tf.int32)


KERNELS = {"cumsum": cumsum, "cumprod": cumprod, "sort": sort, "argsort": argsort, "top_k": top_k}
