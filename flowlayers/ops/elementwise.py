"""Elementwise ops: binary with numpy broadcasting, unary maths and activations, ``where``, cast and constants."""
import numpy as np

from .. import dtypes
from ..errors import DTypeError, ShapeError, describe_shape
from ..framework.blob import Blob
from ..framework.graph import apply, as_blob
from ..framework.op_def import OpDef, Signature
from ..sbp import broadcast as B, partial_sum as P
from . import rules


def broadcast_shapes(a, b):
    out = []
    for i in range(max(len(a), len(b))):
        da = a[len(a) - 1 - i] if i < len(a) else 1
        db = b[len(b) - 1 - i] if i < len(b) else 1
        if da == 1 or da == db:
            out.append(db)
        elif db == 1:
            out.append(da)
        elif da is None or db is None:
            out.append(da if db is None else db)
        else:
            raise ShapeError(f"expected shapes that broadcast, received {describe_shape(a)} and {describe_shape(b)}")
    return tuple(reversed(out))


def _infer_binary(inputs, attrs):
    a, b = inputs
    if a.dtype != b.dtype:
        raise DTypeError(f"expected both operands of one dtype, received {a.dtype} and {b.dtype} "
                         f"(cast one with flow.cast)")
    if attrs.get("logical") and a.dtype != dtypes.bool_:
        raise DTypeError(f"expected bool operands, received dtype {a.dtype}")
    return [(broadcast_shapes(a.shape, b.shape), dtypes.bool_ if attrs.get("compare") else a.dtype)]


def _binary(name, partial=(), **kind):
    """``kind``: ``compare=True`` (a bool result), ``logical=True`` (bool operands and result)."""
    def infer(inputs, attrs):
        return _infer_binary(inputs, {**attrs, **kind})
    return OpDef(name, infer, lambda inputs, attrs: rules.pointwise(inputs, infer(inputs, attrs)[0][0], partial))


ADD = _binary("add", [(P, P)])
SUBTRACT = _binary("subtract", [(P, P)])
MULTIPLY = _binary("multiply", [(P, B), (B, P)])
DIVIDE = _binary("divide", [(P, B)])
MAXIMUM = _binary("maximum")
MINIMUM = _binary("minimum")
EQUAL = _binary("equal", compare=True)
POW = _binary("pow")
GREATER = _binary("greater", compare=True)
NOT_EQUAL = _binary("not_equal", compare=True)
GREATER_EQUAL = _binary("greater_equal", compare=True)
FLOOR_DIVIDE = _binary("floor_divide")
MOD = _binary("mod")
LOGICAL = {n: _binary(n, compare=True, logical=True) for n in ("logical_and", "logical_or", "logical_xor")}


def _infer_unary(inputs, attrs):
    (x,) = inputs
    takes = attrs.get("takes", "float")
    if takes == "float" and not x.dtype.is_floating:
        raise DTypeError(f"expected a floating input, received dtype {x.dtype}")
    if takes == "bool" and x.dtype != dtypes.bool_:
        raise DTypeError(f"expected a bool input, received dtype {x.dtype}")
    return [(x.shape, dtypes.bool_ if attrs.get("test") else x.dtype)]


def _unary(name, linear=False, takes="float", test=False):
    """``takes``: the inputs it takes ("float", "bool" or "any"); ``test``: a bool result (isnan)."""
    partial = [(P,)] if linear else ()
    return OpDef(name, lambda i, a: _infer_unary(i, {"takes": takes, "test": test, **a}),
                 lambda inputs, attrs: rules.pointwise(inputs, inputs[0].shape, partial))


UNARY = {n: _unary(n) for n in (
    "relu", "relu6", "sigmoid", "tanh", "exp", "log", "sqrt", "rsqrt", "square", "gelu",
    "softplus", "softsign", "silu", "elu", "selu", "hard_sigmoid", "leaky_relu",
    "erf", "log1p", "expm1", "sin", "cos", "floor", "ceil", "round")}
UNARY["negative"] = _unary("negative", linear=True, takes="any")
UNARY["abs"] = _unary("abs", takes="any")
UNARY["sign"] = _unary("sign", takes="any")
UNARY["identity"] = _unary("identity", linear=True, takes="any")
UNARY["stop_gradient"] = _unary("stop_gradient", linear=True, takes="any")    # identity with no gradient
UNARY["logical_not"] = _unary("logical_not", takes="bool")
UNARY["isnan"] = _unary("isnan", test=True)
UNARY["isfinite"] = _unary("isfinite", test=True)


def _infer_cast(inputs, attrs):
    return [(inputs[0].shape, attrs["dtype"])]


CAST = OpDef("cast", _infer_cast, lambda inputs, attrs: rules.pointwise(inputs, inputs[0].shape))
CONSTANT = OpDef("constant", lambda inputs, attrs: [(attrs["value"].shape, attrs["dtype"])],
                 lambda inputs, attrs: [Signature((), (B,))], kind="constant")


def _infer_where(inputs, attrs):
    condition, a, b = inputs
    if condition.dtype != dtypes.bool_:
        raise DTypeError(f"where expected a bool condition, received dtype {condition.dtype}")
    if a.dtype != b.dtype:
        raise DTypeError(f"where expected both choices of one dtype, received {a.dtype} and {b.dtype}")
    return [(broadcast_shapes(condition.shape, broadcast_shapes(a.shape, b.shape)), a.dtype)]


# where(c, x, y) is linear in (x, y) together: partial sums of both choices, the condition whole, give one
WHERE = OpDef("where", _infer_where,
              lambda inputs, attrs: rules.pointwise(inputs, _infer_where(inputs, attrs)[0][0], [(B, P, P)]))

# a Blob of ``x``'s shape holding ``value`` (no gradient to ``x``)
FILL_LIKE = OpDef("fill_like", lambda inputs, attrs: [(inputs[0].shape, attrs["dtype"])],
                  lambda inputs, attrs: rules.pointwise(inputs, inputs[0].shape))


def constant(value, dtype=dtypes.float32, name=None):
    """A Blob holding ``value`` (broadcast to every device)."""
    dtype = dtypes.as_dtype(dtype)
    arr = np.asarray(value, dtype=dtype.numpy)
    return apply(CONSTANT, [], {"value": arr, "dtype": dtype}, name)


def _as_blob(x, like):
    x = as_blob(x)
    if isinstance(x, Blob):
        return x
    if isinstance(x, (int, float, bool, np.number, np.ndarray, list)):
        return constant(x, like.dtype)
    raise DTypeError(f"expected a Blob or a number, received {type(x).__name__} {x!r}")


def _binary_fn(op):
    def fn(x, y, name=None):
        x, y = as_blob(x), as_blob(y)
        if not isinstance(x, Blob) and not isinstance(y, Blob):
            raise DTypeError(f"flow.math.{op.name}: expected at least one Blob, received {x!r} and {y!r}")
        x, y = _as_blob(x, y if isinstance(y, Blob) else x), _as_blob(y, x if isinstance(x, Blob) else y)
        return apply(op, [x, y], {}, name)
    fn.__name__ = op.name
    fn.__doc__ = f"Elementwise {op.name} with numpy broadcasting; also a Blob operator where one exists."
    return fn


add, subtract, multiply, divide = map(_binary_fn, (ADD, SUBTRACT, MULTIPLY, DIVIDE))
maximum, minimum, pow = map(_binary_fn, (MAXIMUM, MINIMUM, POW))  # noqa: A001
equal, greater = _binary_fn(EQUAL), _binary_fn(GREATER)
not_equal, greater_equal = _binary_fn(NOT_EQUAL), _binary_fn(GREATER_EQUAL)
floor_divide, mod = _binary_fn(FLOOR_DIVIDE), _binary_fn(MOD)
logical_and, logical_or, logical_xor = (_binary_fn(LOGICAL[n]) for n in ("logical_and", "logical_or", "logical_xor"))


def _unary_fn(op):
    def fn(x, name=None, **attrs):
        return apply(op, [_check_blob(x, op.name)], attrs, name)
    fn.__name__ = op.name
    fn.__doc__ = f"Elementwise {op.name}."
    return fn


def _check_blob(x, what):
    x = as_blob(x)
    if not isinstance(x, Blob):
        raise DTypeError(f"{what}: expected a Blob, received {type(x).__name__} {x!r}")
    return x


globals().update({n: _unary_fn(op) for n, op in UNARY.items()})


def leaky_relu(x, alpha=0.2, name=None):  # noqa: F811 - adds the alpha attribute
    return apply(UNARY["leaky_relu"], [_check_blob(x, "leaky_relu")], {"alpha": float(alpha)}, name)


def cast(x, dtype, name=None):
    """``x`` converted to ``dtype``."""
    return apply(CAST, [_check_blob(x, "cast")], {"dtype": dtypes.as_dtype(dtype, "flow.cast(dtype)")}, name)


def where(condition, x, y, name=None):
    """``x`` where ``condition`` holds, else ``y`` (all three broadcast together)."""
    return apply(WHERE, [_check_blob(condition, "where"), _check_blob(x, "where"), _check_blob(y, "where")], {}, name)


def fill_like(x, value, dtype=None, name=None):
    """A Blob of ``x``'s shape holding ``value`` everywhere, in ``dtype`` (default: ``x``'s); no gradient to ``x``."""
    x = _check_blob(x, "fill_like")
    dtype = x.dtype if dtype is None else dtypes.as_dtype(dtype, "fill_like(dtype)")
    return apply(FILL_LIKE, [x], {"value": np.asarray(value, dtype.numpy).item(), "dtype": dtype}, name)
