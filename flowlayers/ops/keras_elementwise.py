"""Keras 3's elementwise ``keras.ops``: arithmetic, maths, comparisons, logic, ``where`` and ``clip``.

Each takes Keras' arguments and gives Keras' result and dtype: on Blobs (and Variables) it builds the elementwise
ops of ``elementwise.py``; on numbers and numpy arrays it computes with numpy on the host (``dispatch.py``).
"""
import math

import numpy as np

from .. import dtypes
from ..errors import GraphError
from . import elementwise as ew
from .dispatch import blob, floating, host, host_floating, host_promoted, promoted, result_dtype, symbolic


def _binary(name, graph_fn, host_fn, to_float=False, doc=""):
    """Keras' ``name(x1, x2)``: operands promoted to one dtype (to float32 where ``to_float`` and they are ints)."""
    def fn(x1, x2):
        dtype = result_dtype(x1, x2)
        if to_float and not dtype.is_floating:
            dtype = dtypes.float32
        if symbolic(x1, x2):
            return graph_fn(blob(x1, dtype), blob(x2, dtype))
        return np.asarray(host_fn(host(x1, dtype), host(x2, dtype)))
    fn.__name__ = fn.__qualname__ = name
    fn.__doc__ = doc or f"Keras' ``ops.{name}(x1, x2)``, elementwise with numpy broadcasting."
    return fn


def _compare(name, graph_fn, host_fn):
    return _binary(name, graph_fn, host_fn, doc=f"Keras' ``ops.{name}(x1, x2)``: a bool result, elementwise.")


def _logical(name, graph_fn, host_fn):
    def fn(x1, x2):
        if symbolic(x1, x2):
            return graph_fn(blob(x1, dtypes.bool_), blob(x2, dtypes.bool_))
        return host_fn(host(x1).astype(bool), host(x2).astype(bool))
    fn.__name__ = fn.__qualname__ = name
    fn.__doc__ = f"Keras' ``ops.{name}(x1, x2)``: operands taken as bools."
    return fn


add = _binary("add", ew.add, np.add)
subtract = _binary("subtract", ew.subtract, np.subtract)
multiply = _binary("multiply", ew.multiply, np.multiply)
divide = _binary("divide", ew.divide, np.divide, to_float=True)
true_divide = _binary("true_divide", ew.divide, np.divide, to_float=True)
floor_divide = _binary("floor_divide", ew.floor_divide, np.floor_divide)
mod = _binary("mod", ew.mod, np.mod)
power = _binary("power", ew.pow, np.power)
maximum = _binary("maximum", ew.maximum, np.maximum)
minimum = _binary("minimum", ew.minimum, np.minimum)
equal = _compare("equal", ew.equal, np.equal)
not_equal = _compare("not_equal", ew.not_equal, np.not_equal)
greater = _compare("greater", ew.greater, np.greater)
greater_equal = _compare("greater_equal", ew.greater_equal, np.greater_equal)
less = _compare("less", lambda a, b: ew.greater(b, a), np.less)
less_equal = _compare("less_equal", lambda a, b: ew.greater_equal(b, a), np.less_equal)
logical_and = _logical("logical_and", ew.logical_and, np.logical_and)
logical_or = _logical("logical_or", ew.logical_or, np.logical_or)
logical_xor = _logical("logical_xor", ew.logical_xor, np.logical_xor)


def _unary(name, graph_fn, host_fn, to_float=True):
    """Keras' ``name(x)``; ints and bools become float32 first where ``to_float`` (the transcendental maths)."""
    def fn(x):
        if symbolic(x):
            return graph_fn(floating(x) if to_float else blob(x))
        return np.asarray(host_fn(host_floating(x) if to_float else host(x)))
    fn.__name__ = fn.__qualname__ = name
    fn.__doc__ = f"Keras' ``ops.{name}(x)``, elementwise."
    return fn


_host_erf = np.vectorize(math.erf, otypes=[np.float64])


def _same_dtype(fn):
    return lambda x: fn(x).astype(x.dtype)


exp = _unary("exp", ew.exp, np.exp)
expm1 = _unary("expm1", ew.expm1, np.expm1)
log = _unary("log", ew.log, np.log)
log1p = _unary("log1p", ew.log1p, np.log1p)
sqrt = _unary("sqrt", ew.sqrt, np.sqrt)
rsqrt = _unary("rsqrt", ew.rsqrt, lambda x: 1 / np.sqrt(x))
sin = _unary("sin", ew.sin, np.sin)
cos = _unary("cos", ew.cos, np.cos)
tanh = _unary("tanh", ew.tanh, np.tanh)
erf = _unary("erf", ew.erf, _same_dtype(_host_erf))
floor = _unary("floor", ew.floor, np.floor)
ceil = _unary("ceil", ew.ceil, np.ceil)
reciprocal = _unary("reciprocal", lambda x: ew.divide(1.0, x), lambda x: 1 / x)
square = _unary("square", ew.square, np.square, to_float=False)
negative = _unary("negative", ew.negative, np.negative, to_float=False)
absolute = _unary("absolute", ew.abs, np.abs, to_float=False)
abs = absolute  # noqa: A001 - Keras' name
sign = _unary("sign", ew.sign, np.sign, to_float=False)


def round(x, decimals=0):  # noqa: A001 - Keras' name
    """Keras' ``ops.round(x, decimals=0)``: halves to even, as numpy."""
    if decimals:
        scale = 10.0 ** decimals
        return divide(round(multiply(x, scale)), scale)
    if symbolic(x):
        x = blob(x)
        return ew.round(x) if x.dtype.is_floating else x
    return np.round(host(x))


def logical_not(x):
    """Keras' ``ops.logical_not(x)``: ``x`` taken as bools."""
    if symbolic(x):
        return ew.logical_not(blob(x, dtypes.bool_))
    return np.logical_not(host(x).astype(bool))


def isnan(x):
    """Keras' ``ops.isnan(x)``: False everywhere for ints."""
    if symbolic(x):
        x = blob(x)
        return ew.isnan(x) if x.dtype.is_floating else ew.fill_like(x, False, dtypes.bool_)
    return np.isnan(host(x))


def isfinite(x):
    """Keras' ``ops.isfinite(x)``: True everywhere for ints."""
    if symbolic(x):
        x = blob(x)
        return ew.isfinite(x) if x.dtype.is_floating else ew.fill_like(x, True, dtypes.bool_)
    return np.isfinite(host(x))


def where(condition, x1=None, x2=None):
    """Keras' ``ops.where(condition, x1, x2)``: ``x1`` where ``condition`` holds, else ``x2``.  The one-argument
    form (the indices where it holds) has a size known only from the data: refused by name."""
    if x1 is None or x2 is None:
        raise GraphError("flow.ops.where(condition) without x1 and x2 returns the indices where the condition "
                         "holds, whose number the data decides; a graph needs its shapes before it runs. Expected "
                         "where(condition, x1, x2) (e.g. where(mask, x, 0.0)); received x1="
                         f"{'None' if x1 is None else '...'}, x2={'None' if x2 is None else '...'}")
    if symbolic(condition, x1, x2):
        a, b = promoted(x1, x2)
        return ew.where(blob(condition, dtypes.bool_), a, b)
    a, b = host_promoted(x1, x2)
    return np.where(host(condition).astype(bool), a, b)


def clip(x, x_min, x_max):
    """Keras' ``ops.clip(x, x_min, x_max)``: ``minimum(maximum(x, x_min), x_max)``."""
    dtype = result_dtype(x, x_min, x_max)
    if dtype == dtypes.bool_:
        dtype = dtypes.int32
    if symbolic(x, x_min, x_max):
        return ew.minimum(ew.maximum(blob(x, dtype), blob(x_min, dtype)), blob(x_max, dtype))
    return np.clip(host(x, dtype), host(x_min, dtype), host(x_max, dtype))
