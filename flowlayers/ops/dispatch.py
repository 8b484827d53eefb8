"""How a ``flow.ops`` function (Keras 3's ``keras.ops``) takes its arguments.

Given a Blob or a Variable anywhere among them, it builds graph ops (numbers and numpy arrays beside become
constants); given only numbers and numpy arrays, it computes at once on the host with numpy, as Keras' ops run on
concrete values.  Dtypes combine as Keras combines them: Python numbers are "weak" (they take the other operand's
dtype where it can hold them), a float with an int gives the float, two floats or two ints give the wider.
"""
import builtins

import numpy as np

from .. import dtypes
from ..framework.blob import Blob
from ..framework.graph import as_blob, is_tensor
from .elementwise import cast, constant
from .shape import concat, reshape

_FLOATS = ("float16", "bfloat16", "float32", "float64")
_INTS = ("int8", "int32", "int64")


def flat(values):
    for v in values:
        if isinstance(v, (list, tuple)):
            yield from flat(v)
        else:
            yield v


def symbolic(*values):
    """Whether any of ``values`` (lists and tuples looked into) is a Blob or stands for one (a Variable)."""
    return builtins.any(is_tensor(v) for v in flat(values))


def _weak(x):
    return isinstance(x, (builtins.bool, builtins.int, builtins.float)) or (
        isinstance(x, (list, tuple)) and builtins.all(_weak(v) for v in x))


def dtype_of(x):
    """The flowlayers dtype of a Blob, Variable or array; of a Python number (or list of them), Keras' default
    for its kind (float32, int32, bool)."""
    x = as_blob(x)
    if isinstance(x, Blob):
        return x.dtype
    if _weak(x):
        kinds = {type(v) for v in flat([x])}
        return dtypes.float32 if builtins.float in kinds else dtypes.int32 if builtins.int in kinds else dtypes.bool_
    return dtypes.as_dtype(np.asarray(x).dtype)


def _wider(a, b):
    if a == b:
        return a
    if {a.name, b.name} == {"float16", "bfloat16"}:
        return dtypes.float32
    if a.is_floating != b.is_floating:
        return a if a.is_floating else b
    if a == dtypes.bool_ or b == dtypes.bool_:
        return b if a == dtypes.bool_ else a
    order = _FLOATS if a.is_floating else _INTS
    return a if order.index(a.name) > order.index(b.name) else b


def result_dtype(*values):
    """Keras' result dtype of combining ``values``: Python numbers count only where nothing else decides (an int
    tensor with a Python float gives float32)."""
    strong = [dtype_of(v) for v in values if v is not None and not _weak(v)]
    weak = [dtype_of(v) for v in values if v is not None and _weak(v)]
    if not strong:
        strong, weak = weak, []
    out = strong[0]
    for d in strong[1:]:
        out = _wider(out, d)
    if builtins.any(w.is_floating for w in weak) and not out.is_floating:
        out = dtypes.float32
    elif builtins.any(w == dtypes.int32 for w in weak) and out == dtypes.bool_:
        out = dtypes.int32
    return out


def host(x, dtype=None):
    """``x`` (a number, list or array) as a numpy array, in ``dtype`` where given; Python numbers in Keras'
    default dtype of their kind."""
    dtype = dtype if dtype is not None else dtype_of(x) if _weak(x) else None
    return np.asarray(x, None if dtype is None else dtypes.as_dtype(dtype).numpy)


def blob(x, dtype=None):
    """``x`` as a Blob (a Variable read, a number or array made a constant), cast to ``dtype`` where given."""
    x = as_blob(x)
    if isinstance(x, Blob):
        return x if dtype is None or x.dtype == dtypes.as_dtype(dtype) else cast(x, dtype)
    if isinstance(x, (list, tuple)) and x and symbolic(x):     # Keras' ops on a list of tensors: stacked
        parts = promoted(*x) if dtype is None else [blob(v, dtype) for v in x]
        return concat([reshape(p, (1,) + tuple(p.shape)) for p in parts], axis=0)
    value = host(x, dtype)
    return constant(value, dtypes.as_dtype(value.dtype))


def promoted(*values):
    """``values`` as Blobs of one dtype, Keras' result dtype of them."""
    dtype = result_dtype(*values)
    return [blob(v, dtype) for v in values]


def floating(x):
    """A Blob of ``x`` in a floating dtype: ints and bools become float32, as Keras' float-only maths take them."""
    x = blob(x)
    return x if x.dtype.is_floating else cast(x, dtypes.float32)


def host_floating(x):
    """``x`` on the host in a floating dtype: ints and bools become float32."""
    x = host(x)
    return x if x.dtype.kind == "f" or x.dtype.name == "bfloat16" else x.astype(np.float32)


def host_promoted(*values):
    dtype = result_dtype(*values)
    return [host(v, dtype) for v in values]


def axis_tuple(axis, ndim):
    """None (every axis), an int or a sequence of ints, as a sorted tuple of non-negative axes."""
    if axis is None:
        return tuple(range(ndim))
    axes = (axis,) if isinstance(axis, int) else tuple(axis)
    return tuple(sorted(a % ndim for a in axes))
