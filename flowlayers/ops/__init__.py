"""``flow.ops``: Keras 3's ``keras.ops`` on Blobs (and on numbers and numpy arrays); under it, the ops themselves.

``from keras import ops`` becomes ``from flowlayers import ops``: ``ops.matmul(x, self.kernel)``, ``ops.mean(x,
axis=1)``, ``ops.shape(x)`` inside a layer's ``call`` build graph ops; on numbers and arrays they compute at once
with numpy.  The public functions live in ``keras_*.py`` (elementwise, arrays, products, reductions, nn), how
they take their arguments in ``dispatch.py``; a Keras name flowlayers lacks is refused by name, saying what to use.

Every op is declared once as data (an ``OpDef``: shape and dtype inference, SBP signatures), one file per family
(``elementwise.py``, ``reduce.py``, ``shape.py``, ``matmul.py``, ...), each with its builder functions.  Keras'
names ``matmul``, ``einsum``, ``shape``, ``norm`` and ``conv`` are functions here: import those families by their
module path (``from flowlayers.ops.shape import reshape``), never as ``from flowlayers.ops import shape``.
"""
import importlib
import pkgutil

from .. import missing
from ..errors import GraphError
from ..framework.op_def import OpDef
# the families whose module names are also Keras' function names are loaded first: loading one later would put
# the module back in place of the function
from . import conv, einsum, matmul, norm, shape  # noqa: F401
from .keras_arrays import (arange, argsort, broadcast_to, cast, concatenate, convert_to_numpy,  # noqa: F401
                           convert_to_tensor, expand_dims, eye, flip, full, full_like, linspace, moveaxis, ndim, ones,
                           ones_like, pad, repeat, reshape, shape, slice, sort, split, squeeze, stack, stop_gradient,
                           swapaxes, take, take_along_axis, tile, top_k, transpose, tril, triu, zeros, zeros_like)
from .keras_conv import average_pool, conv, max_pool  # noqa: F401,F811
from .keras_elementwise import (abs, absolute, add, ceil, clip, cos, divide, equal, erf, exp, expm1,  # noqa: F401
                                floor, floor_divide, greater, greater_equal, isfinite, isnan, less, less_equal, log,
                                log1p, logical_and, logical_not, logical_or, logical_xor, maximum, minimum, mod,
                                multiply, negative, not_equal, power, reciprocal, round, rsqrt, sign, sin, sqrt,
                                square, subtract, tanh, true_divide, where)
from .keras_nn import (celu, dot_product_attention, elu, gelu, glu, hard_sigmoid, hard_silu, hard_swish,  # noqa: F401
                       leaky_relu, log_sigmoid, log_softmax, moments, normalize, one_hot, relu, relu6, selu, sigmoid,
                       silu, softmax, softplus, softsign, swish)
from .keras_products import dot, einsum, matmul, outer, tensordot  # noqa: F401,F811
from .keras_reductions import (all, any, argmax, argmin, average, count_nonzero, cumprod, cumsum,  # noqa: F401
                               logsumexp, max, mean, min, norm, prod, segment_sum, std, sum, var)


def by_name():
    """Every OpDef of the front end by its name (what a saved model names its ops by)."""
    found = {}
    for info in pkgutil.iter_modules(__path__):
        for value in vars(importlib.import_module(f"{__name__}.{info.name}")).values():
            for op in value.values() if isinstance(value, dict) else [value]:
                if isinstance(op, OpDef):
                    found.setdefault(op.name, op)
    return found


def __getattr__(name):
    """A Keras ``ops`` name flowlayers lacks: a GraphError naming it and what to use instead."""
    return missing.refuse("ops", name, GraphError, globals())
