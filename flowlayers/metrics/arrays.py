"""The array functions that metric formulas use, alike on numpy arrays and on Blobs.

A metric's formula is written once with these: on numpy arrays it runs on the host (a metric used on its own,
``update_state``), on Blobs it builds the statistics a training or evaluation step sums.  Each function takes
numpy arrays or Blobs (not a mix of Blobs with arrays other than numbers) and returns the same kind.
"""
import numpy as np

from .. import dtypes
from ..framework.blob import Blob
from ..ops import elementwise as ew, nn, reduce
from ..ops.matmul import matmul as matmul_blob
from ..ops.shape import reshape as reshape_blob

EPSILON = 1e-7     # Keras' backend.epsilon()


def is_blob(x):
    return isinstance(x, Blob)


def cast(x, dtype):
    dtype = dtypes.as_dtype(dtype)
    if is_blob(x):
        return x if x.dtype == dtype else ew.cast(x, dtype)
    return np.asarray(x).astype(dtype.numpy, copy=False)


def dtype_of(x):
    return x.dtype if is_blob(x) else dtypes.as_dtype(np.asarray(x).dtype.name)


def constant(value, like):
    """``value`` as an array of ``like``'s dtype and kind (a constant Blob for a Blob)."""
    value = np.asarray(value, dtype_of(like).numpy)
    return ew.constant(value, dtype_of(like)) if is_blob(like) else value


def equal(a, b):
    return ew.equal(a, b) if is_blob(a) or is_blob(b) else np.equal(a, b)


def greater(a, b):
    return ew.greater(a, b) if is_blob(a) or is_blob(b) else np.greater(a, b)


def maximum(a, b):
    return ew.maximum(a, b) if is_blob(a) or is_blob(b) else np.maximum(a, b)


def minimum(a, b):
    return ew.minimum(a, b) if is_blob(a) or is_blob(b) else np.minimum(a, b)


def clip(x, low, high):
    return minimum(maximum(x, low), high)


def _unary(name, host):
    def fn(x):
        return getattr(ew, name)(x) if is_blob(x) else host(x)
    fn.__name__ = name
    return fn


def _rsqrt(x):
    with np.errstate(divide="ignore"):
        return (1 / np.sqrt(x)).astype(x.dtype)


square = _unary("square", np.square)
abs = _unary("abs", np.abs)  # noqa: A001 - the numpy name
log = _unary("log", np.log)
sqrt = _unary("sqrt", np.sqrt)
rsqrt = _unary("rsqrt", _rsqrt)
exp = _unary("exp", np.exp)
softplus = _unary("softplus", lambda x: np.logaddexp(x, np.zeros((), x.dtype)))
sigmoid = _unary("sigmoid", lambda x: (1 / (1 + np.exp(-x))).astype(x.dtype))


def _axes(x, axis):
    ndim = x.ndim
    if axis is None:
        return tuple(range(ndim))
    return tuple(a % ndim for a in ((axis,) if isinstance(axis, int) else axis))


def mean(x, axis=-1, keepdims=False):
    if is_blob(x):
        return reduce.reduce_mean(x, axis=list(_axes(x, axis)), keepdims=keepdims)
    return np.mean(x, axis=_axes(x, axis), keepdims=keepdims)


def total(x, axis=-1, keepdims=False):
    if is_blob(x):
        return reduce.reduce_sum(x, axis=list(_axes(x, axis)), keepdims=keepdims)
    return np.sum(x, axis=_axes(x, axis), keepdims=keepdims)


def largest(x, axis=-1, keepdims=False):
    if is_blob(x):
        return reduce.reduce_max(x, axis=list(_axes(x, axis)), keepdims=keepdims)
    return np.max(x, axis=_axes(x, axis), keepdims=keepdims)


def argmax(x):
    """The index of the largest entry of the last axis (the first of equal ones), as int64."""
    return reduce.argmax(x, -1) if is_blob(x) else np.argmax(x, axis=-1).astype(np.int64)


def softmax(x):
    if is_blob(x):
        return nn.softmax(x, -1)
    e = np.exp(x - np.max(x, axis=-1, keepdims=True))
    return e / np.sum(e, axis=-1, keepdims=True)


def log_softmax(x):
    if is_blob(x):
        return nn.log_softmax(x, -1)
    shifted = x - np.max(x, axis=-1, keepdims=True)
    return shifted - np.log(np.sum(np.exp(shifted), axis=-1, keepdims=True))


def one_hot(ids, depth, like):
    """``ids`` (integers) one-hot over a new last axis of ``depth``, in ``like``'s dtype."""
    if is_blob(ids):
        return nn.one_hot(cast(ids, dtypes.int64), depth, dtype_of(like))
    return np.eye(depth, dtype=dtype_of(like).numpy)[np.asarray(ids).astype(np.int64)]


def shape(x):
    return tuple(x.shape)


def reshape(x, new_shape):
    """``x`` reshaped; ``None`` (a Blob's batch) stands for the size that is left."""
    if is_blob(x):
        return reshape_blob(x, new_shape)
    return np.reshape(x, tuple(-1 if d is None else d for d in new_shape))


def expand_last(x):
    return reshape(x, shape(x) + (1,))


def squeeze_last(x):
    return reshape(x, shape(x)[:-1])


def same_rank(x1, x2, expand_rank_1=True):
    """Keras' ``squeeze_or_expand_to_same_rank``: where the ranks differ by one and the longer ends in 1, that axis
    is dropped (or, with ``expand_rank_1``, one added to a rank-1 other)."""
    r1, r2 = len(shape(x1)), len(shape(x2))
    if r1 == r2 + 1 and shape(x1)[-1] == 1:
        if r2 == 1 and expand_rank_1:
            x2 = expand_last(x2)
        else:
            x1 = squeeze_last(x1)
    if r2 == r1 + 1 and shape(x2)[-1] == 1:
        if r1 == 1 and expand_rank_1:
            x1 = expand_last(x1)
        else:
            x2 = squeeze_last(x2)
    return x1, x2


def per_example(x):
    """Each example's mean over its other axes (Keras' Mean takes one value per example)."""
    return mean(x, axis=list(range(1, len(shape(x))))) if len(shape(x)) > 1 else x


def columns(x, count):
    """``count`` arrays whose sums are the sums of ``x``'s last-axis entries 0, 1, ...: on the host, the columns;
    in a step, ``x`` with the other entries zeroed (a step sums a statistic whole, keeping its batch axis first)."""
    if is_blob(x):
        eye = np.eye(count, dtype=x.dtype.numpy)
        return [x * ew.constant(eye[c], x.dtype) for c in range(count)]
    return [x[..., c] for c in range(count)]


def grouped_sums(xs, groups):
    """For each array of ``xs`` (alike in shape), arrays whose whole sums are, per group (indices into its entries
    after the batch axis, flattened), the sum of those entries: on the host, the selected columns; in a step, a
    product with a 0/1 column each (one column per group, shared by the arrays)."""
    width = int(np.prod(shape(xs[0])[1:]))
    flats = [reshape(x, (None, width)) for x in xs]
    if not is_blob(xs[0]):
        return [flat[:, group] for flat in flats for group in groups]
    dtype = xs[0].dtype
    cols = []
    for group in groups:
        col = np.zeros((width, 1), dtype.numpy)
        col[list(group)] = 1
        cols.append(ew.constant(col, dtype))
    return [matmul_blob(flat, col) for flat in flats for col in cols]


def column(x, c):
    """Entry ``c`` of the last axis, kept as an axis of 1 (``x[..., c:c+1]``)."""
    if is_blob(x):
        row = np.zeros(shape(x)[-1], x.dtype.numpy)
        row[c] = 1
        return total(x * ew.constant(row, x.dtype), keepdims=True)
    return x[..., c:c + 1]


def leading(x, k):
    """A 0/1 row (broadcast against ``x``) marking the first ``k`` entries of its last axis."""
    return constant(np.arange(shape(x)[-1]) < k, x)


def count_above(x, target):
    """How many entries of ``x``'s last axis exceed ``target`` (one value per row, kept as an axis of 1)."""
    return total(cast(greater(x, target), dtype_of(x)), keepdims=True)


def top_k_mask(x, k):
    """A 0/1 array marking the ``k`` largest entries of each row of the last axis; of equal entries the first
    ones (``top_k``'s order)."""
    n = shape(x)[-1]
    if not is_blob(x):
        order = np.argsort(-x, axis=-1, kind="stable")[..., :k]
        mask = np.zeros(x.shape, x.dtype)
        np.put_along_axis(mask, order, 1, axis=-1)
        return mask
    rows = reshape(x, shape(x) + (1,))              # [..., j, 1]: entry j
    others = reshape(x, shape(x)[:-1] + (1, n))     # [..., 1, l]: entry l
    before = np.tril(np.ones((n, n), x.dtype.numpy), -1)    # l before j
    ahead = cast(greater(others, rows), x.dtype) + cast(equal(others, rows), x.dtype) * ew.constant(before, x.dtype)
    return cast(greater(float(k), total(ahead)), x.dtype)
