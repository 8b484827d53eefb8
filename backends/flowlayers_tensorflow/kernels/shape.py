"""reshape, transpose, concat, gather, one_hot, SBP constraints (identity on values)."""
import tensorflow as tf

from flowlayers.sbp import Split

from ..dtypes import tf_dtype


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


def gather(node, table, ids, ctx):
    if ctx.splits(node, 0, 0):      # rows split (vocabulary parallel): DTensor refuses a gather from them
        rank = len(ids.shape)
        # the one-hot ids split as the ids are, and over the table's rows where those are split: DTensor's own
        # layout propagation otherwise contradicts the relayouts around the product on some meshes
        hot_sbp = tuple(Split(rank) if t == Split(0) else i
                        for t, i in zip(ctx.input_sbp(node, 0), ctx.input_sbp(node, 1)))
        hot = ctx.lay_out(tf.one_hot(ids, table.shape[0], dtype=table.dtype), hot_sbp)
        dims = "abcdefghijklmnopqrstu"[:rank]      # (DTensor's einsum takes no "...")
        return tf.einsum(f"{dims}v,vw->{dims}w", hot, table)
    return tf.gather(table, ids)


def one_hot(node, ids, ctx):
    return tf.one_hot(ids, node.attrs["depth"], dtype=tf_dtype(node.attrs["dtype"]))


def pad(node, x, ctx):
    return tf.pad(x, node.attrs["paddings"])


def sbp_constraint(node, x, ctx):
    return tf.identity(x)


KERNELS = {"reshape": reshape, "transpose": transpose, "concat": concat, "gather": gather, "one_hot": one_hot,
           "pad": pad, "sbp_constraint": sbp_constraint}
