"""reshape, transpose, concat, pad, slice, SBP constraints (identity on values): ``flowlayers/ops/shape.py``."""
import tensorflow as tf


def reshape(node, x, ctx):
    out, in_shape = node.outputs[0].shape, node.inputs[0].shape
    if out and in_shape and out[0] == in_shape[0] and None not in out[1:]:
        # the batch dim is carried: keep it as fed (a replica's rows, or a smaller last batch)
        return tf.reshape(x, (-1,) + out[1:])
    return tf.reshape(x, [-1 if d is None else d for d in node.attrs["shape"]])


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
