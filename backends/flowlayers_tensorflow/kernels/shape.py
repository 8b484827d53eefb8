"""reshape, transpose, concat, pad, slice, SBP constraints (identity on values): ``flowlayers/ops/shape.py``."""
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


def slice_(node, x, ctx):
    return x[tuple(slice(b, e) for b, e in node.attrs["bounds"])]


def sbp_constraint(node, x, ctx):
    return tf.identity(x)


KERNELS = {"reshape": reshape, "transpose": transpose, "concat": concat, "pad": pad, "slice": slice_,
           "sbp_constraint": sbp_constraint}
