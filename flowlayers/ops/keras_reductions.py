"""Keras 3's reductions and scans: ``sum``, ``mean``, ``max`` ... ``std``, ``var``, ``norm``, ``logsumexp``,
``cumsum``, ``segment_sum``, with Keras' dtypes (a mean of ints is float32, an argmax int32).

On Blobs they build the ops of ``reduce.py`` and ``along_axis.py`` (``std``, ``var``, ``norm``, ``logsumexp`` and
``segment_sum`` are composed of them); on numbers and numpy arrays they run numpy.
"""
import numpy as np

from .. import dtypes
from ..errors import GraphError, ShapeError
from . import along_axis, elementwise as ew, reduce
from .dispatch import axis_tuple, blob, floating, host, host_floating, symbolic
from .einsum import einsum as einsum_op
from .keras_arrays import reshape
from .nn import one_hot as one_hot_op


def _reduction(name, op, host_fn, dtype_rule=None):
    """Keras' ``name(x, axis=None, keepdims=False)``; ``dtype_rule(dtype)`` the dtype it reduces in."""
    def fn(x, axis=None, keepdims=False):
        if not symbolic(x):
            x = host(x)
            dtype = _rule(dtype_rule, dtypes.as_dtype(x.dtype)).numpy
            return np.asarray(host_fn(x.astype(dtype), axis=axis, keepdims=keepdims)).astype(dtype)
        x = blob(x)
        x = blob(x, _rule(dtype_rule, x.dtype))
        return op(x, axis_tuple(axis, x.ndim), keepdims)
    fn.__name__ = fn.__qualname__ = name
    fn.__doc__ = f"Keras' ``ops.{name}(x, axis=None, keepdims=False)``."
    return fn


def _rule(rule, dtype):
    return dtype if rule is None else rule(dtype)


def _to_float(dtype):
    return dtype if dtype.is_floating else dtypes.float32


def _bool_to_int(dtype):
    return dtypes.int32 if dtype == dtypes.bool_ else dtype


def _to_bool(dtype):
    return dtypes.bool_


sum = _reduction("sum", reduce.reduce_sum, np.sum, _bool_to_int)  # noqa: A001 - Keras' names
mean = _reduction("mean", reduce.reduce_mean, np.mean, _to_float)
any = _reduction("any", reduce.reduce_any, np.any, _to_bool)  # noqa: A001
all = _reduction("all", reduce.reduce_all, np.all, _to_bool)  # noqa: A001


def _extreme(name, op, host_fn, pick):
    def fn(x, axis=None, keepdims=False, initial=None):
        if not symbolic(x):
            return np.asarray(host_fn(host(x), axis=axis, keepdims=keepdims,
                                      **({} if initial is None else {"initial": initial})))
        x = blob(x)
        out = op(x, axis_tuple(axis, x.ndim), keepdims)
        return out if initial is None else pick(out, blob(initial, out.dtype))
    fn.__name__ = fn.__qualname__ = name
    fn.__doc__ = f"Keras' ``ops.{name}(x, axis=None, keepdims=False, initial=None)``."
    return fn


max = _extreme("max", reduce.reduce_max, np.max, ew.maximum)  # noqa: A001
min = _extreme("min", reduce.reduce_min, np.min, ew.minimum)  # noqa: A001


def prod(x, axis=None, keepdims=False, dtype=None):
    """Keras' ``ops.prod``; ``dtype`` the dtype it multiplies in."""
    if not symbolic(x):
        x = host(x, dtype)
        return np.prod(x, axis=axis, keepdims=keepdims).astype(x.dtype)
    x = blob(x, dtype)
    return reduce.reduce_prod(x, axis_tuple(axis, x.ndim), keepdims)


def _arg(name, op, host_fn):
    def fn(x, axis=None, keepdims=False):
        if not symbolic(x):
            return np.asarray(host_fn(host(x), axis=axis, keepdims=keepdims)).astype(np.int32)
        x = blob(x)
        if axis is None:
            x, axis = reshape(x, (-1,)), 0
        out = ew.cast(op(x, axis), dtypes.int32)
        return reshape(out, x.shape[:axis % x.ndim] + (1,) + x.shape[axis % x.ndim + 1:]) if keepdims else out
    fn.__name__ = fn.__qualname__ = name
    fn.__doc__ = f"Keras' ``ops.{name}(x, axis=None, keepdims=False)``: int32 indices."
    return fn


argmax = _arg("argmax", reduce.argmax, np.argmax)
argmin = _arg("argmin", reduce.argmin, np.argmin)


def var(x, axis=None, keepdims=False):
    """Keras' ``ops.var``: the mean of squared deviations from the mean (float32 for ints)."""
    if not symbolic(x):
        return np.var(host_floating(x), axis=axis, keepdims=keepdims)
    x = floating(x)
    axes = axis_tuple(axis, x.ndim)
    centered = ew.subtract(x, reduce.reduce_mean(x, axes, keepdims=True))
    return reduce.reduce_mean(ew.square(centered), axes, keepdims)


def std(x, axis=None, keepdims=False):
    if not symbolic(x):
        return np.std(host_floating(x), axis=axis, keepdims=keepdims)
    return ew.sqrt(var(x, axis, keepdims))


def logsumexp(x, axis=None, keepdims=False):
    """Keras' ``ops.logsumexp``: ``log(sum(exp(x)))`` computed shifted by the max (no overflow)."""
    if not symbolic(x):
        x = host_floating(x)
        top = np.max(x, axis=axis, keepdims=True)
        out = np.log(np.sum(np.exp(x - top), axis=axis, keepdims=True)) + top
        return out if keepdims else np.squeeze(out, axis=axis)
    x = floating(x)
    axes = axis_tuple(axis, x.ndim)
    top = ew.stop_gradient(reduce.reduce_max(x, axes, keepdims=True))
    out = ew.add(ew.log(reduce.reduce_sum(ew.exp(ew.subtract(x, top)), axes, keepdims=True)), top)
    return out if keepdims else reshape(out, [d for k, d in enumerate(x.shape) if k not in axes])


def count_nonzero(x, axis=None):
    """Keras' ``ops.count_nonzero``: int32 counts."""
    if not symbolic(x):
        return np.asarray(np.count_nonzero(host(x), axis=axis)).astype(np.int32)
    x = blob(x)
    nonzero = ew.cast(ew.not_equal(x, ew.fill_like(x, 0)), dtypes.int32)
    return reduce.reduce_sum(nonzero, axis_tuple(axis, x.ndim))


def average(x, axis=None, weights=None):
    """Keras' ``ops.average``: ``weights`` (None: equal) of ``x``'s shape, or 1-D along ``axis``."""
    if not symbolic(x, weights):
        return np.average(host_floating(x), axis=axis, weights=None if weights is None else host(weights))
    if weights is None:
        return mean(x, axis)
    x, w = floating(x), floating(weights)
    if w.ndim == 1 and x.ndim > 1:
        w = reshape(w, [w.shape[0] if k == axis % x.ndim else 1 for k in range(x.ndim)])
    axes = axis_tuple(axis, x.ndim)
    return ew.divide(reduce.reduce_sum(ew.multiply(x, w), axes), reduce.reduce_sum(ew.multiply(ew.fill_like(x, 1), w),
                                                                                   axes))


def _scan(name, op, host_fn):
    def fn(x, axis=None, dtype=None):
        if not symbolic(x):
            x = host(x, dtype)
            return host_fn(x, axis=axis).astype(_bool_to_int(dtypes.as_dtype(x.dtype)).numpy)
        x = blob(x, dtype)
        if axis is None:
            x, axis = reshape(x, (-1,)), 0
        return op(blob(x, _bool_to_int(x.dtype)), axis)
    fn.__name__ = fn.__qualname__ = name
    fn.__doc__ = f"Keras' ``ops.{name}(x, axis=None, dtype=None)``: None flattens ``x`` first."
    return fn


cumsum = _scan("cumsum", along_axis.cumsum, np.cumsum)
cumprod = _scan("cumprod", along_axis.cumprod, np.cumprod)


def norm(x, ord=None, axis=None, keepdims=False):  # noqa: A002 - Keras' name
    """Keras' ``ops.norm``: vector norms (``ord`` None/2, 1, inf, -inf, 0 or any p) over one axis, matrix norms
    (None/'fro', 1, -1, inf, -inf) over two; those needing singular values ('nuc', 2, -2 on matrices) refused."""
    if not symbolic(x):
        return np.linalg.norm(host_floating(x), ord, axis, keepdims)
    x = floating(x)
    if axis is None:
        if ord is None:
            out = _p_norm(reshape(x, (-1,)), 2, (0,), False)
            return reshape(out, (1,) * x.ndim) if keepdims else out
        axis = tuple(range(x.ndim))
    axes = axis_tuple(axis, x.ndim)
    if len(axes) == 1:
        return _p_norm(x, 2 if ord is None else ord, axes, keepdims)
    if len(axes) == 2:
        return _matrix_norm(x, ord, axes, keepdims)
    raise ShapeError(f"flow.ops.norm: expected one or two axes, received axis={axis!r}")


def _p_norm(x, p, axes, keepdims):
    magnitude = ew.abs(x)
    if p == np.inf:
        return reduce.reduce_max(magnitude, axes, keepdims)
    if p == -np.inf:
        return reduce.reduce_min(magnitude, axes, keepdims)
    if p == 0:
        return reduce.reduce_sum(ew.cast(ew.not_equal(x, ew.fill_like(x, 0)), x.dtype), axes, keepdims)
    if p == 1:
        return reduce.reduce_sum(magnitude, axes, keepdims)
    if p == 2:
        return ew.sqrt(reduce.reduce_sum(ew.square(x), axes, keepdims))
    if isinstance(p, str):
        raise ShapeError(f"flow.ops.norm: ord={p!r} is a matrix norm; expected two axes, received axis {axes}")
    return ew.pow(reduce.reduce_sum(ew.pow(magnitude, float(p)), axes, keepdims), 1.0 / float(p))


def _matrix_norm(x, ord, axes, keepdims):  # noqa: A002
    rows, cols = axes
    if ord in (None, "fro"):
        return ew.sqrt(reduce.reduce_sum(ew.square(x), axes, keepdims))
    if ord in (1, -1, np.inf, -np.inf):
        summed, then = (rows, cols) if ord in (1, -1) else (cols, rows)
        sums = reduce.reduce_sum(ew.abs(x), (summed,), keepdims=True)
        pick = reduce.reduce_max if ord in (1, np.inf) else reduce.reduce_min
        out = pick(sums, (then,), keepdims=True)
        return out if keepdims else reshape(out, [d for k, d in enumerate(x.shape) if k not in axes])
    raise GraphError(f"flow.ops.norm: ord={ord!r} over two axes needs singular values, which flowlayers does not "
                     f"compute; expected ord None, 'fro', 1, -1, inf or -inf for a matrix, received {ord!r}")


def segment_sum(data, segment_ids, num_segments=None, sorted=False):  # noqa: A002 - Keras' name
    """Keras' ``ops.segment_sum``: the rows of ``data`` summed by segment id (ids outside [0, num_segments) are
    dropped).  ``num_segments`` must be given: without it the data decides the output's size (refused)."""
    if num_segments is None:
        raise GraphError("flow.ops.segment_sum: num_segments=None makes the output's size the largest id plus one, "
                         "which the data decides; a graph needs its shapes before it runs. Expected an int "
                         "num_segments, received None")
    if not symbolic(data, segment_ids):
        data, ids = host(data), host(segment_ids)
        out = np.zeros((num_segments,) + data.shape[ids.ndim:], data.dtype)
        keep = (ids >= 0) & (ids < num_segments)
        np.add.at(out, ids[keep], data[keep])
        return out
    data, ids = blob(data), blob(segment_ids, dtypes.int32)
    rows = "".join(chr(ord("a") + k) for k in range(ids.ndim))
    rest = "".join(chr(ord("n") + k) for k in range(data.ndim - ids.ndim))
    membership = one_hot_op(ids, int(num_segments), dtype=data.dtype)
    return einsum_op(f"{rows}z,{rows}{rest}->z{rest}", membership, data)
