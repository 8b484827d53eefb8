"""slice, take, take_along_axis (``flowlayers/ops/indexing.py``); negative indices count from the end."""
import tensorflow as tf


def slice_(node, x, ctx):
    return x[tuple(slice(b, e) for b, e in zip(node.attrs["begin"], node.attrs["end"]))]


def _wrapped(indices, size):
    return tf.where(indices < 0, indices + tf.cast(size, indices.dtype), indices)


def take(node, x, indices, ctx):
    axis = node.attrs["axis"]
    return tf.gather(x, _wrapped(indices, tf.shape(x)[axis]), axis=axis)


def take_along_axis(node, x, indices, ctx):
    """A gather along the last axis with every other axis a batch axis: ``axis`` moved last and back."""
    axis, rank = node.attrs["axis"], len(node.inputs[0].shape)
    perm = [k for k in range(rank) if k != axis] + [axis]
    back = [perm.index(k) for k in range(rank)]
    indices = _wrapped(indices, tf.shape(x)[axis])
    moved = tf.gather(tf.transpose(x, perm), tf.transpose(indices, perm), axis=rank - 1, batch_dims=rank - 1)
    return tf.transpose(moved, back)


KERNELS = {"slice": slice_, "take": take, "take_along_axis": take_along_axis}
