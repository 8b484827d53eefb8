"""Elementwise ops: binary with numpy broadcasting, unary activations, cast and constants."""
import numpy as np

from .. import dtypes
from ..errors import DTypeError, ShapeError, describe_shape
from ..framework.blob import Blob
from ..framework.graph import apply
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
    return [(broadcast_shapes(a.shape, b.shape), dtypes.bool_ if attrs.get("compare") else a.dtype)]


def _binary(name, partial=()):
    return OpDef(name, _infer_binary,
                 lambda inputs, attrs: rules.pointwise(inputs, _infer_binary(inputs, attrs)[0][0], partial))


ADD = _binary("add", [(P, P)])
SUBTRACT = _binary("subtract", [(P, P)])
MULTIPLY = _binary("multiply", [(P, B), (B, P)])
DIVIDE = _binary("divide", [(P, B)])
MAXIMUM = _binary("maximum")
MINIMUM = _binary("minimum")
EQUAL = OpDef("equal", lambda i, a: _infer_binary(i, {**a, "compare": True}),
              lambda inputs, attrs: rules.pointwise(inputs, _infer_binary(inputs, attrs)[0][0]))
POW = _binary("pow")
GREATER = OpDef("greater", EQUAL.infer, EQUAL.signatures)


def _infer_unary(inputs, attrs):
    (x,) = inputs
    if attrs.get("float_only", True) and not x.dtype.is_floating:
        raise DTypeError(f"expected a floating input, received dtype {x.dtype}")
    return [(x.shape, x.dtype)]


def _unary(name, linear=False, float_only=True):
    partial = [(P,)] if linear else ()
    return OpDef(name, lambda i, a: _infer_unary(i, {"float_only": float_only, **a}),
                 lambda inputs, attrs: rules.pointwise(inputs, inputs[0].shape, partial))


UNARY = {n: _unary(n) for n in (
    "relu", "relu6", "sigmoid", "tanh", "exp", "log", "sqrt", "rsqrt", "square", "gelu",
    "softplus", "softsign", "silu", "elu", "selu", "hard_sigmoid", "leaky_relu")}
UNARY["negative"] = _unary("negative", linear=True, float_only=False)
UNARY["abs"] = _unary("abs", float_only=False)
UNARY["identity"] = _unary("identity", linear=True, float_only=False)


def _infer_cast(inputs, attrs):
    return [(inputs[0].shape, attrs["dtype"])]


CAST = OpDef("cast", _infer_cast, lambda inputs, attrs: rules.pointwise(inputs, inputs[0].shape))
CONSTANT = OpDef("constant", lambda inputs, attrs: [(attrs["value"].shape, attrs["dtype"])],
                 lambda inputs, attrs: [Signature((), (B,))], kind="constant")


def constant(value, dtype=dtypes.float32, name=None):
    """A Blob holding ``value`` (broadcast to every device)."""
    dtype = dtypes.as_dtype(dtype)
    arr = np.asarray(value, dtype=dtype.numpy)
    return apply(CONSTANT, [], {"value": arr, "dtype": dtype}, name)


def _as_blob(x, like):
    if isinstance(x, Blob):
        return x
    if isinstance(x, (int, float, bool, np.number, np.ndarray, list)):
        return constant(x, like.dtype)
    raise DTypeError(f"expected a Blob or a number, received {type(x).__name__} {x!r}")


def _binary_fn(op):
    def fn(x, y, name=None):
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


def _unary_fn(op):
    def fn(x, name=None, **attrs):
        return apply(op, [_check_blob(x, op.name)], attrs, name)
    fn.__name__ = op.name
    fn.__doc__ = f"Elementwise {op.name}."
    return fn


def _check_blob(x, what):
    if not isinstance(x, Blob):
        raise DTypeError(f"{what}: expected a Blob, received {type(x).__name__} {x!r}")
    return x


globals().update({n: _unary_fn(op) for n, op in UNARY.items()})


def leaky_relu(x, alpha=0.2, name=None):  # noqa: F811 - adds the alpha attribute
    return apply(UNARY["leaky_relu"], [_check_blob(x, "leaky_relu")], {"alpha": float(alpha)}, name)


def cast(x, dtype, name=None):
    """``x`` converted to ``dtype``."""
    return apply(CAST, [_check_blob(x, "cast")], {"dtype": dtypes.as_dtype(dtype, "flow.cast(dtype)")}, name)
