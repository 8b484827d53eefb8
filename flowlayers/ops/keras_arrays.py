"""Keras 3's ``keras.ops`` that make, reshape, join, cut, index and sort arrays.

On Blobs they build ``shape.py``, ``indexing.py`` and ``along_axis.py`` ops (repeat, tile and flip gather with
indices known when the graph is built); on numbers and numpy arrays they run numpy.  What makes a new array from
sizes alone (``arange``, ``zeros``, ``eye``) always runs on the host: its result becomes a constant where a Blob
meets it.  A size the graph does not know (the batch, ``None``) cannot size a new array: ``zeros_like`` and
``full_like`` follow a Blob's shape instead.
"""
import numpy as np

from .. import dtypes
from ..errors import GraphError, ShapeError, describe_shape
from ..framework.blob import Blob
from ..framework.graph import as_blob, is_tensor
from . import along_axis, elementwise as ew, indexing
from .dispatch import axis_tuple, blob, host, promoted, result_dtype, symbolic
from .elementwise import constant
from .shape import concat, pad as zero_pad, reshape as reshape_blob, transpose as transpose_blob


# --------------------------------------------------------------------------- what a value is
def shape(x):
    """Keras' ``ops.shape(x)``: a tuple of ints; on a Blob its static shape, None for a size not known (the
    batch), as Keras' symbolic shape."""
    x = as_blob(x)
    return tuple(x.shape) if isinstance(x, Blob) else tuple(np.shape(x))


def ndim(x):
    return len(shape(x))


def cast(x, dtype):
    """Keras' ``ops.cast(x, dtype)``."""
    dtype = dtypes.as_dtype(dtype, "flow.ops.cast(dtype)")
    return blob(x, dtype) if symbolic(x) else host(x).astype(dtype.numpy)


def convert_to_tensor(x, dtype=None, sparse=None, ragged=None):
    """Keras' ``ops.convert_to_tensor``: a Blob (a Variable read) stays in the graph; a number or array becomes a
    numpy array.  Sparse and ragged tensors are not supported: refused by name."""
    for what, value in (("sparse", sparse), ("ragged", ragged)):
        if value:
            raise GraphError(f"flow.ops.convert_to_tensor({what}=True): {what} tensors are not supported by "
                             f"flowlayers; expected {what}=None or False, received {value!r}")
    if symbolic(x):
        return blob(x, dtype)
    return host(x, None if dtype is None else dtypes.as_dtype(dtype, "flow.ops.convert_to_tensor(dtype)"))


def convert_to_numpy(x):
    """Keras' ``ops.convert_to_numpy``: a Variable's value, a number's or array's; a Blob has no value while the
    graph is built (refused by name)."""
    if isinstance(x, Blob):
        raise GraphError(f"flow.ops.convert_to_numpy: Blob {x.name!r} has no value while the graph is built; "
                         f"expected a Variable, number or array, received a symbolic Blob (compute with flow.ops "
                         f"instead, or read results from predict)")
    return x.numpy() if is_tensor(x) else np.asarray(x)


def stop_gradient(variable):
    """Keras' ``ops.stop_gradient``: the same values, no gradient flows back through them."""
    return ew.stop_gradient(blob(variable)) if symbolic(variable) else host(variable)


# --------------------------------------------------------------------------- new arrays (on the host)
def _sizes(value, what, like_name):
    sizes = (value,) if isinstance(value, int) else tuple(value)
    if any(is_tensor(d) for d in sizes) or any(d is None for d in sizes):
        raise GraphError(f"flow.ops.{what}: expected sizes known when the graph is built, received {sizes!r} (a "
                         f"None is the batch, which the data decides); use flow.ops.{like_name}(x) to follow a "
                         f"Blob's shape")
    return tuple(int(d) for d in sizes)


def arange(start, stop=None, step=None, dtype=None):
    """Keras' ``ops.arange``: int32 for int bounds, float32 where one is a float."""
    if symbolic(start, stop, step) or start is None:
        raise GraphError(f"flow.ops.arange: expected int or float bounds known when the graph is built, received "
                         f"start={start!r}, stop={stop!r}, step={step!r} (a None from flow.ops.shape is the batch, "
                         f"which the data decides); take a size known when the graph is built from flow.ops.shape")
    dtype = dtypes.as_dtype(dtype) if dtype is not None else result_dtype(*[v for v in (start, stop, step)
                                                                            if v is not None])
    return np.arange(start, stop, 1 if step is None else step, dtype=dtype.numpy)


def zeros(shape, dtype=None):
    return np.zeros(_sizes(shape, "zeros", "zeros_like"), dtypes.as_dtype(dtype).numpy)


def ones(shape, dtype=None):
    return np.ones(_sizes(shape, "ones", "ones_like"), dtypes.as_dtype(dtype).numpy)


def full(shape, fill_value, dtype=None):
    return np.full(_sizes(shape, "full", "full_like"), host(fill_value), dtypes.as_dtype(dtype).numpy)


def eye(N, M=None, k=0, dtype=None):  # noqa: N803 - Keras' names
    return np.eye(N, M, k, dtypes.as_dtype(dtype).numpy)


def linspace(start, stop, num=50, endpoint=True, retstep=False, dtype=None, axis=0):
    if symbolic(start, stop):
        raise GraphError("flow.ops.linspace: expected bounds known when the graph is built, received a Blob")
    return np.linspace(start, stop, num, endpoint, retstep, dtypes.as_dtype(dtype).numpy, axis)


def full_like(x, fill_value, dtype=None):
    """Keras' ``ops.full_like``: ``x``'s shape (the batch included), ``x``'s dtype unless ``dtype`` is given."""
    if symbolic(x):
        x = blob(x)
        return ew.fill_like(x, host(fill_value).item(), dtype)
    x = host(x)
    return np.full(x.shape, host(fill_value), x.dtype if dtype is None else dtypes.as_dtype(dtype).numpy)


def zeros_like(x, dtype=None):
    return full_like(x, 0, dtype)


def ones_like(x, dtype=None):
    return full_like(x, 1, dtype)


# --------------------------------------------------------------------------- reshaping
def _host_or(fn_graph, fn_host):
    def run(x, *args):
        return fn_graph(blob(x), *args) if symbolic(x) else fn_host(host(x), *args)
    return run


def reshape(x, newshape):
    """Keras' ``ops.reshape(x, newshape)``: one entry may be -1; None keeps the batch of unknown size."""
    newshape = (newshape,) if isinstance(newshape, int) else tuple(newshape)
    return _host_or(reshape_blob, np.reshape)(x, newshape)


def transpose(x, axes=None):
    n = ndim(x)
    axes = tuple(reversed(range(n))) if axes is None else tuple(a % n for a in axes)
    return _host_or(transpose_blob, np.transpose)(x, axes)


def swapaxes(x, axis1, axis2):
    perm = list(range(ndim(x)))
    perm[axis1], perm[axis2] = perm[axis2], perm[axis1]
    return transpose(x, perm)


def moveaxis(x, source, destination):
    n = ndim(x)
    source = [a % n for a in ((source,) if isinstance(source, int) else source)]
    destination = [a % n for a in ((destination,) if isinstance(destination, int) else destination)]
    perm = [a for a in range(n) if a not in source]
    for dst, src in sorted(zip(destination, source)):
        perm.insert(dst, src)
    return transpose(x, perm)


def expand_dims(x, axis):
    """Keras' ``ops.expand_dims``: a dim of size 1 at ``axis`` (an int or a tuple of them)."""
    old = list(shape(x))
    axes = (axis,) if isinstance(axis, int) else tuple(axis)
    new_rank = len(old) + len(axes)
    for a in sorted(a % new_rank for a in axes):
        old.insert(a, 1)
    return reshape(x, old)


def squeeze(x, axis=None):
    """Keras' ``ops.squeeze``: drop dims of size 1 (those at ``axis``, or every one)."""
    old = shape(x)
    axes = [k for k, d in enumerate(old) if d == 1] if axis is None else list(axis_tuple(axis, len(old)))
    for k in axes:
        if old[k] != 1:
            raise ShapeError(f"flow.ops.squeeze: expected a dim of size 1 at axis {k}, received shape "
                             f"{describe_shape(old)}")
    return reshape(x, [d for k, d in enumerate(old) if k not in axes])


def broadcast_to(x, shape):
    """Keras' ``ops.broadcast_to``: ``x`` repeated to ``shape`` as numpy broadcasting does; a size None (the
    batch) only where ``x`` has that size too."""
    if not symbolic(x):
        return np.broadcast_to(host(x), _sizes(shape, "broadcast_to", "full_like"))
    x, target = blob(x), tuple(shape)
    lead = len(target) - x.ndim
    for k, d in enumerate(target):
        if d is None and (k < lead or x.shape[k - lead] is not None):
            raise GraphError(f"flow.ops.broadcast_to: expected a size None only where {describe_shape(x.shape)} "
                             f"has its batch, received {target!r}; give the sizes, or use flow.ops.full_like(x) to "
                             f"follow a Blob's shape")
    ones = np.ones([1 if d is None else d for d in target], bool)
    return ew.where(constant(ones, dtypes.bool_), x, x)


# --------------------------------------------------------------------------- joining and cutting
def concatenate(xs, axis=0):
    """Keras' ``ops.concatenate(xs, axis=0)``; ``axis=None`` joins them flattened."""
    if axis is None:
        xs, axis = [reshape(x, (-1,)) for x in xs], 0
    if symbolic(*xs):
        return concat(promoted(*xs), axis=axis)
    return np.concatenate(host_list(xs), axis=axis)


def host_list(xs):
    dtype = result_dtype(*xs)
    return [host(x, dtype) for x in xs]


def stack(x, axis=0):
    """Keras' ``ops.stack(x, axis=0)``: ``x`` a list of arrays of one shape, joined along a new axis."""
    x = list(x)
    if symbolic(*x):
        new = len(shape(x[0])) + 1
        return concatenate([expand_dims(t, axis % new) for t in x], axis=axis % new)
    return np.stack(host_list(x), axis=axis)


def split(x, indices_or_sections, axis=0):
    """Keras' ``ops.split``: a list of pieces, ``indices_or_sections`` equal pieces or the indices cut at."""
    if not symbolic(x):
        return np.split(host(x), indices_or_sections, axis=axis)
    x = blob(x)
    axis %= x.ndim
    size = x.shape[axis]
    if size is None:
        raise ShapeError(f"flow.ops.split: expected an axis of known size, received axis {axis} of shape "
                         f"{describe_shape(x.shape)} (the batch)")
    if isinstance(indices_or_sections, int):
        if indices_or_sections <= 0 or size % indices_or_sections:
            raise ShapeError(f"flow.ops.split: expected a number of sections dividing axis {axis} of size {size}, "
                             f"received {indices_or_sections}")
        step = size // indices_or_sections
        cuts = list(range(step, size, step))
    else:
        cuts = [min(max(int(i) % size if i < 0 else int(i), 0), size) for i in indices_or_sections]
    edges = [0] + cuts + [size]
    return [_cut(x, axis, b, max(b, e)) for b, e in zip(edges[:-1], edges[1:])]


def _cut(x, axis, begin, end):
    starts = [0] * x.ndim
    ends = [None if d is None else d for d in x.shape]
    starts[axis], ends[axis] = begin, end
    return indexing.static_slice(x, starts, ends)


def slice(inputs, start_indices, shape):  # noqa: A001 - Keras' name
    """Keras' ``ops.slice(inputs, start_indices, shape)``: starts and sizes known when the graph is built."""
    if not symbolic(inputs):
        return host(inputs)[tuple(np.s_[b:b + n] for b, n in zip(start_indices, shape))]
    x = blob(inputs)
    begin = [int(b) for b in start_indices]
    end = [None if d is None and b == 0 and n in (-1, None) else b + n for b, n, d in zip(begin, shape, x.shape)]
    return indexing.static_slice(x, begin, end)


def pad(x, pad_width, mode="constant", constant_values=None):
    """Keras' ``ops.pad``: ``pad_width`` as numpy takes it; mode "constant" (other modes refused by name)."""
    if mode != "constant":
        raise GraphError(f"flow.ops.pad: mode {mode!r} is not supported by flowlayers; expected mode='constant' "
                         f"(with constant_values), received mode={mode!r}")
    if not symbolic(x):
        return np.pad(host(x), pad_width, constant_values=0 if constant_values is None else constant_values)
    x = blob(x)
    pairs = np.broadcast_to(np.asarray(pad_width, np.int64), (x.ndim, 2)).tolist()
    if not constant_values:
        return zero_pad(x, pairs)
    fill = blob(constant_values, x.dtype)
    return ew.add(zero_pad(ew.subtract(x, fill), pairs), fill)


# --------------------------------------------------------------------------- indexing
def take(x, indices, axis=None):
    """Keras' ``ops.take``: elements at ``indices`` along ``axis`` (None: of ``x`` flattened)."""
    if not symbolic(x, indices):
        return np.take(host(x), _wrapped(host(indices), host(x), axis), axis=axis)
    if axis is None:
        x, axis = reshape(x, (-1,)), 0
    x, indices = blob(x), blob(indices)
    if not indices.dtype.is_integer:
        indices = ew.cast(indices, dtypes.int32)
    return indexing.take(x, indices, axis)


def _wrapped(indices, x, axis):
    size = x.size if axis is None else x.shape[axis]
    return np.where(indices < 0, indices + size, indices)


def take_along_axis(x, indices, axis=None):
    """Keras' ``ops.take_along_axis``: ``indices`` broadcast against ``x`` but along ``axis``."""
    if not symbolic(x, indices):
        return np.take_along_axis(host(x), _wrapped(host(indices), host(x), axis), axis=axis)
    if axis is None:
        x, indices, axis = reshape(x, (-1,)), reshape(indices, (-1,)), 0
    x, indices = blob(x), blob(indices)
    axis %= x.ndim
    if indices.ndim == x.ndim:          # broadcast one against the other on every axis but ``axis``
        both = [_broadcast_dim(a, b) for a, b in zip(x.shape, indices.shape)]
        x_to = tuple(x.shape[k] if k == axis else d for k, d in enumerate(both))
        indices_to = tuple(indices.shape[k] if k == axis else d for k, d in enumerate(both))
        x = x if x_to == x.shape else broadcast_to(x, x_to)
        indices = indices if indices_to == indices.shape else broadcast_to(indices, indices_to)
    return indexing.take_along_axis(x, indices, axis)


def _broadcast_dim(a, b):
    return b if a == 1 else a


def _gather_each(x, index_of, axes):
    """``x`` gathered along each axis of ``axes`` by the static indices ``index_of(size)``."""
    for a in axes:
        size = x.shape[a]
        if size is None:
            raise ShapeError(f"expected an axis of known size, received axis {a} of shape {describe_shape(x.shape)} "
                             f"(the batch)")
        x = indexing.take(x, constant(index_of(size, a), dtypes.int32), a)
    return x


def flip(x, axis=None):
    """Keras' ``ops.flip``: the order reversed along ``axis`` (every axis when None)."""
    if not symbolic(x):
        return np.flip(host(x), axis)
    x = blob(x)
    return _gather_each(x, lambda n, a: np.arange(n - 1, -1, -1), axis_tuple(axis, x.ndim))


def repeat(x, repeats, axis=None):
    """Keras' ``ops.repeat``: each element ``repeats`` times along ``axis`` (None: of ``x`` flattened)."""
    if not symbolic(x):
        return np.repeat(host(x), repeats, axis)
    if axis is None:
        x, axis = reshape(x, (-1,)), 0
    x = blob(x)
    return _gather_each(x, lambda n, a: np.repeat(np.arange(n), repeats), (axis % x.ndim,))


def tile(x, repeats):
    """Keras' ``ops.tile``: ``x`` repeated whole ``repeats[k]`` times along each axis k."""
    if not symbolic(x):
        return np.tile(host(x), repeats)
    repeats = (repeats,) if isinstance(repeats, int) else tuple(repeats)
    x = blob(x)
    if len(repeats) > x.ndim:
        x = reshape(x, (1,) * (len(repeats) - x.ndim) + x.shape)
    repeats = (1,) * (x.ndim - len(repeats)) + repeats
    axes = [k for k, r in enumerate(repeats) if r != 1]
    return _gather_each(x, lambda n, a: np.tile(np.arange(n), repeats[a]), axes)


def _triangle(x, k, lower):
    if not symbolic(x):
        return (np.tril if lower else np.triu)(host(x), k)
    x = blob(x)
    rows, cols = x.shape[-2:]
    keep = (np.tril if lower else np.triu)(np.ones((rows, cols), bool), k)
    return ew.where(constant(keep, dtypes.bool_), x, ew.fill_like(x, 0))


def tril(x, k=0):
    return _triangle(x, k, True)


def triu(x, k=0):
    return _triangle(x, k, False)


# --------------------------------------------------------------------------- sorting
def sort(x, axis=-1):
    return along_axis.sort(blob(x), axis) if symbolic(x) else np.sort(host(x), axis)


def argsort(x, axis=-1):
    """Keras' ``ops.argsort``: int32 indices, ties in their order (stable)."""
    if symbolic(x):
        return along_axis.argsort(blob(x), axis)
    return np.argsort(host(x), axis, kind="stable").astype(np.int32)


def top_k(x, k, sorted=True):  # noqa: A002 - Keras' name
    """Keras' ``ops.top_k``: ``(values, indices)`` of the ``k`` largest along the last axis, largest first."""
    if symbolic(x):
        return along_axis.top_k(blob(x), k, sorted)
    x = host(x)
    order = np.argsort(-x, axis=-1, kind="stable")[..., :k].astype(np.int32)
    return np.take_along_axis(x, order, -1), order
