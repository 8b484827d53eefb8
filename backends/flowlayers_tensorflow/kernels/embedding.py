"""gather: an embedding lookup (``flowlayers/ops/embedding.py``)."""
import tensorflow as tf

from flowlayers.sbp import Split


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


KERNELS = {"gather": gather}
