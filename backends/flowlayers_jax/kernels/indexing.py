"""slice, take, take_along_axis (``flowlayers/ops/indexing.py``); negative indices count from the end."""
import jax.numpy as jnp


def slice_(node, x, ctx):
    return x[tuple(slice(b, e) for b, e in zip(node.attrs["begin"], node.attrs["end"]))]


def _wrapped(indices, size):
    return jnp.where(indices < 0, indices + size, indices)


def take(node, x, indices, ctx):
    axis = node.attrs["axis"]
    return jnp.take(x, _wrapped(indices, x.shape[axis]), axis=axis)


def take_along_axis(node, x, indices, ctx):
    axis = node.attrs["axis"]
    return jnp.take_along_axis(x, _wrapped(indices, x.shape[axis]), axis=axis)


KERNELS = {"slice": slice_, "take": take, "take_along_axis": take_along_axis}
