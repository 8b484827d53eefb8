"""reshape, transpose, concat, pad, SBP constraints (identity on values): ``flowlayers/ops/shape.py``."""
import tensorflow as tf

from flowlayers.backend_common import reshaped


def reshape(node, x, ctx):
    return tf.reshape(x, reshaped(node))


def transpose(node, x, ctx):
    return tf.transpose(x, node.attrs["perm"])


def concat(node, *xs, ctx):
    return tf.concat(xs, axis=node.attrs["axis"])


def pad(node, x, ctx):
    return tf.pad(x, node.attrs["paddings"])


def sbp_constraint(node, x, ctx):
    return tf.identity(x)


KERNELS = {"reshape": reshape, "transpose": transpose, "concat": concat, "pad": pad, "sbp_constraint": sbp_constraint}
