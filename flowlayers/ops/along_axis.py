"""Ops along one axis, each line along it independent of the others: cumulative sums and products, sort,
argsort and top-k.  Any other axis may be split; a cumulative sum is linear, so a partial sum gives one."""
from .. import dtypes
from ..errors import ShapeError, describe_shape
from ..framework.graph import apply, as_blob
from ..framework.op_def import OpDef, Signature
from ..sbp import Split as S, broadcast as B, partial_sum as P


def _other_axes(x, axis, n_out=1):
    return [Signature((S(k),), (S(k),) * n_out) for k in range(x.ndim) if k != axis]


def _signatures(linear=False, n_out=1, axis_of=lambda inputs, attrs: attrs["axis"]):
    def sigs(inputs, attrs):
        out = _other_axes(inputs[0], axis_of(inputs, attrs), n_out) + [Signature((B,), (B,) * n_out)]
        return out + [Signature((P,), (P,))] if linear else out
    return sigs


def _same(inputs, attrs):
    return [(inputs[0].shape, inputs[0].dtype)]


CUMSUM = OpDef("cumsum", _same, _signatures(linear=True))
CUMPROD = OpDef("cumprod", _same, _signatures())
SORT = OpDef("sort", _same, _signatures())
ARGSORT = OpDef("argsort", lambda inputs, attrs: [(inputs[0].shape, dtypes.int32)], _signatures())


def _infer_top_k(inputs, attrs):
    (x,), k = inputs, attrs["k"]
    if x.ndim < 1 or x.shape[-1] is not None and not 0 < k <= x.shape[-1]:
        raise ShapeError(f"top_k expected k in [1, {x.shape[-1] if x.ndim else 0}] for shape "
                         f"{describe_shape(x.shape)}, received k={k}")
    shape = x.shape[:-1] + (k,)
    return [(shape, x.dtype), (shape, dtypes.int32)]


TOP_K = OpDef("top_k", _infer_top_k, _signatures(n_out=2, axis_of=lambda inputs, attrs: inputs[0].ndim - 1))


def _axis(x, axis, what):
    if isinstance(axis, bool) or not isinstance(axis, int) or not -x.ndim <= axis < x.ndim:
        raise ShapeError(f"{what} expected an int axis in [{-x.ndim}, {x.ndim}) for shape {describe_shape(x.shape)}, "
                         f"received {axis!r}")
    return axis % x.ndim


def _along(op):
    def fn(x, axis=-1, name=None):
        x = as_blob(x)
        return apply(op, [x], {"axis": _axis(x, axis, op.name)}, name)
    fn.__name__ = op.name
    fn.__doc__ = f"{op.name} of ``x`` along ``axis``."
    return fn


cumsum, cumprod, sort, argsort = map(_along, (CUMSUM, CUMPROD, SORT, ARGSORT))


def top_k(x, k, sorted=True, name=None):  # noqa: A002 - Keras' name
    """The ``k`` largest values along the last axis and their indices (int32), largest first."""
    if not sorted:
        raise ShapeError("top_k(sorted=False) is not supported: expected sorted=True (the values come largest "
                         "first); received sorted=False")
    if isinstance(k, bool) or not isinstance(k, int):
        raise ShapeError(f"top_k expected an int k, received {k!r}")
    return apply(TOP_K, [as_blob(x)], {"k": k}, name)
