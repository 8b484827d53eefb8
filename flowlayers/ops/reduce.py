"""Reductions: sum, mean, max, min, prod, any, all over axes; argmax, argmin."""
from .. import dtypes
from ..errors import DTypeError, ShapeError, describe_shape
from ..framework.graph import apply, as_blob
from ..framework.op_def import OpDef, Signature
from ..sbp import Split as S, broadcast as B, partial_sum as P


def _axes(x, axis):
    if axis is None:
        return tuple(range(x.ndim))
    axes = (axis,) if isinstance(axis, int) else tuple(axis)
    for a in axes:
        if not -x.ndim <= a < x.ndim:
            raise ShapeError(f"expected axes in [{-x.ndim}, {x.ndim}) for shape {describe_shape(x.shape)}, "
                             f"received axis {a}")
    return tuple(sorted(a % x.ndim for a in axes))


def _infer(inputs, attrs):
    (x,) = inputs
    axes = attrs["axes"]
    shape = tuple(1 if i in axes else d for i, d in enumerate(x.shape)) if attrs["keepdims"] else \
        tuple(d for i, d in enumerate(x.shape) if i not in axes)
    return [(shape, dtypes.int64 if attrs.get("arg") else x.dtype)]


def _out_axis(k, axes, keepdims):
    return k if keepdims else k - sum(a < k for a in axes)


def _signatures(linear_over_split):
    def sigs(inputs, attrs):
        (x,), axes, keep = inputs, attrs["axes"], attrs["keepdims"]
        out = [Signature((S(k),), (S(_out_axis(k, axes, keep)),)) for k in range(x.ndim) if k not in axes]
        if linear_over_split:            # a sum over a split axis is a partial sum
            out += [Signature((S(k),), (P,)) for k in axes]
        out.append(Signature((B,), (B,)))
        if linear_over_split or attrs.get("linear"):
            out.append(Signature((P,), (P,)))
        return out
    return sigs


REDUCE_SUM = OpDef("reduce_sum", _infer, _signatures(True))
REDUCE_MEAN = OpDef("reduce_mean", _infer, lambda i, a: _signatures(False)(i, {**a, "linear": True}))
REDUCE_MAX = OpDef("reduce_max", _infer, _signatures(False))
REDUCE_MIN = OpDef("reduce_min", _infer, _signatures(False))
REDUCE_PROD = OpDef("reduce_prod", _infer, _signatures(False))
REDUCE_ANY = OpDef("reduce_any", _infer, _signatures(False))
REDUCE_ALL = OpDef("reduce_all", _infer, _signatures(False))
ARGMAX = OpDef("argmax", _infer, _signatures(False))
ARGMIN = OpDef("argmin", _infer, _signatures(False))


def _reduce(op, x, axis, keepdims, name, **extra):
    x = as_blob(x)
    return apply(op, [x], {"axes": _axes(x, axis), "keepdims": bool(keepdims), **extra}, name)


def reduce_sum(input_tensor, axis=None, keepdims=False, name=None):
    return _reduce(REDUCE_SUM, input_tensor, axis, keepdims, name)


def reduce_mean(input_tensor, axis=None, keepdims=False, name=None):
    return _reduce(REDUCE_MEAN, input_tensor, axis, keepdims, name)


def reduce_max(input_tensor, axis=None, keepdims=False, name=None):
    return _reduce(REDUCE_MAX, input_tensor, axis, keepdims, name)


def reduce_min(input_tensor, axis=None, keepdims=False, name=None):
    return _reduce(REDUCE_MIN, input_tensor, axis, keepdims, name)


def reduce_prod(input_tensor, axis=None, keepdims=False, name=None):
    return _reduce(REDUCE_PROD, input_tensor, axis, keepdims, name)


def reduce_any(input_tensor, axis=None, keepdims=False, name=None):
    """Whether any element along ``axis`` holds (bool input)."""
    return _reduce(REDUCE_ANY, _bool(input_tensor, "reduce_any"), axis, keepdims, name)


def reduce_all(input_tensor, axis=None, keepdims=False, name=None):
    """Whether every element along ``axis`` holds (bool input)."""
    return _reduce(REDUCE_ALL, _bool(input_tensor, "reduce_all"), axis, keepdims, name)


def _bool(x, what):
    if x.dtype != dtypes.bool_:
        raise DTypeError(f"{what} expected a bool input, received dtype {x.dtype}")
    return x


def argmax(input, axis=-1, name=None):  # noqa: A002
    """Index of the largest value along ``axis`` (int64)."""
    return _arg(ARGMAX, input, axis, name)


def argmin(input, axis=-1, name=None):  # noqa: A002
    """Index of the smallest value along ``axis`` (int64)."""
    return _arg(ARGMIN, input, axis, name)


def _arg(op, x, axis, name):
    if isinstance(axis, bool) or not isinstance(axis, int):
        raise ShapeError(f"{op.name} expected one int axis, received {axis!r}")
    return _reduce(op, x, axis, False, name, arg=True)
