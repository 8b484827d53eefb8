"""Reductions."""
import tensorflow as tf


def _reduce(fn):
    def kernel(node, x, ctx):
        return fn(x, axis=list(node.attrs["axes"]), keepdims=node.attrs["keepdims"])
    return kernel


def argmax(node, x, ctx):
    return tf.argmax(x, axis=node.attrs["axes"][0], output_type=tf.int64)


KERNELS = {"reduce_sum": _reduce(tf.reduce_sum), "reduce_mean": _reduce(tf.reduce_mean),
           "reduce_max": _reduce(tf.reduce_max), "argmax": argmax}
