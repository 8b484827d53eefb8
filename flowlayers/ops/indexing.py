"""Indexing ops: a static slice, ``take`` (elements gathered along one axis) and ``take_along_axis``.

Every one is linear in the tensor it reads, so a partial-sum tensor with whole indices gives a partial sum.  A
slice keeps the splits of the axes it takes whole; ``take`` keeps those of the axes it does not gather along, or
follows split indices; ``take_along_axis`` splits tensor and indices alike along any axis but its own.  Negative
indices count from the end, as in numpy and Keras.
"""
from ..errors import DTypeError, ShapeError, describe_shape
from ..framework.graph import apply, as_blob
from ..framework.op_def import OpDef, Signature
from ..sbp import Split as S, broadcast as B, partial_sum as P


def _infer_slice(inputs, attrs):
    (x,) = inputs
    begin, end = attrs["begin"], attrs["end"]
    if len(begin) != x.ndim or len(end) != x.ndim:
        raise ShapeError(f"slice expected one (begin, end) per dim of shape {describe_shape(x.shape)}, received "
                         f"begin {list(begin)} and end {list(end)}")
    shape = []
    for d, b, e in zip(x.shape, begin, end):
        if d is None:
            if (b, e) != (0, None):
                raise ShapeError(f"slice expected the dim of unknown size (the batch) taken whole, received "
                                 f"[{b}:{e}] of shape {describe_shape(x.shape)}")
            shape.append(None)
        elif not 0 <= b <= e <= d:
            raise ShapeError(f"slice expected 0 <= begin <= end <= size on every dim of shape "
                             f"{describe_shape(x.shape)}, received begin {list(begin)} and end {list(end)}")
        else:
            shape.append(e - b)
    return [(tuple(shape), x.dtype)]


def _whole(x, begin, end):
    return [k for k, (d, b, e) in enumerate(zip(x.shape, begin, end)) if b == 0 and e in (d, None)]


SLICE = OpDef("slice", _infer_slice, lambda inputs, attrs: [
    Signature((S(k),), (S(k),)) for k in _whole(inputs[0], attrs["begin"], attrs["end"])
] + [Signature((B,), (B,)), Signature((P,), (P,))])


def static_slice(x, begin, end, name=None):
    """``x[begin[0]:end[0], begin[1]:end[1], ...]``: counts known when the graph is built, steps of one; ``end``
    None on the dim of unknown size (the batch) takes it whole."""
    x = as_blob(x)
    return apply(SLICE, [x], {"begin": tuple(int(b) for b in begin),
                              "end": tuple(None if e is None else int(e) for e in end)}, name)


def _check_indices(indices, what):
    if not indices.dtype.is_integer:
        raise DTypeError(f"{what} expected integer indices, received dtype {indices.dtype}")


def _infer_take(inputs, attrs):
    x, indices = inputs
    _check_indices(indices, "take")
    axis = attrs["axis"]
    return [(x.shape[:axis] + indices.shape + x.shape[axis + 1:], x.dtype)]


def _take_signatures(inputs, attrs):
    x, indices = inputs
    axis, n = attrs["axis"], indices.ndim
    return ([Signature((S(k), B), (S(k if k < axis else k + n - 1),)) for k in range(x.ndim) if k != axis]
            + [Signature((B, S(j)), (S(axis + j),)) for j in range(n)]
            + [Signature((B, B), (B,)), Signature((P, B), (P,))])


TAKE = OpDef("take", _infer_take, _take_signatures)


def take(x, indices, axis, name=None):
    """Elements of ``x`` at ``indices`` along ``axis``: shape ``x.shape[:axis] + indices.shape +
    x.shape[axis+1:]``."""
    x, indices = as_blob(x), as_blob(indices)
    if not -x.ndim <= axis < x.ndim:
        raise ShapeError(f"take expected an axis in [{-x.ndim}, {x.ndim}) for shape {describe_shape(x.shape)}, "
                         f"received {axis}")
    return apply(TAKE, [x, indices], {"axis": axis % x.ndim}, name)


def _infer_take_along_axis(inputs, attrs):
    x, indices = inputs
    _check_indices(indices, "take_along_axis")
    axis = attrs["axis"]
    if indices.ndim != x.ndim or any(a != b for k, (a, b) in enumerate(zip(x.shape, indices.shape)) if k != axis):
        raise ShapeError(f"take_along_axis expected indices of the input's shape but along axis {axis}, received "
                         f"{describe_shape(indices.shape)} for input {describe_shape(x.shape)}")
    return [(indices.shape, x.dtype)]


TAKE_ALONG_AXIS = OpDef("take_along_axis", _infer_take_along_axis, lambda inputs, attrs: [
    Signature((S(k), S(k)), (S(k),)) for k in range(inputs[0].ndim) if k != attrs["axis"]
] + [Signature((B, B), (B,)), Signature((P, B), (P,))])


def take_along_axis(x, indices, axis, name=None):
    """``out[..., i, ...] = x[..., indices[..., i, ...], ...]`` along ``axis``."""
    x, indices = as_blob(x), as_blob(indices)
    if not -x.ndim <= axis < x.ndim:
        raise ShapeError(f"take_along_axis expected an axis in [{-x.ndim}, {x.ndim}) for shape "
                         f"{describe_shape(x.shape)}, received {axis}")
    return apply(TAKE_ALONG_AXIS, [x, indices], {"axis": axis % x.ndim}, name)
