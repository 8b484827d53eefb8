"""Elementwise ops -> jax.numpy / jax.nn."""
import jax
import jax.numpy as jnp
from jax import lax

from ..dtypes import array_dtype, jax_dtype


def _chooser(pick, first_wins):
    """``pick`` (jnp.maximum, jnp.minimum) with TF's gradient: on a tie all of it goes to the first operand
    (jnp splits it in halves)."""
    @jax.custom_jvp
    def fn(a, b):
        return pick(a, b)

    @fn.defjvp
    def jvp(primals, tangents):
        (a, b), (ta, tb) = primals, tangents
        return pick(a, b), jnp.where(first_wins(a, b), ta, tb)
    return fn


BINARY = {
    "add": jnp.add, "subtract": jnp.subtract, "multiply": jnp.multiply, "divide": jnp.divide,
    "maximum": _chooser(jnp.maximum, jnp.greater_equal), "minimum": _chooser(jnp.minimum, jnp.less_equal),
    "equal": jnp.equal, "greater": jnp.greater, "pow": jnp.power,
    "not_equal": jnp.not_equal, "greater_equal": jnp.greater_equal, "floor_divide": jnp.floor_divide,
    "mod": jnp.mod, "logical_and": jnp.logical_and, "logical_or": jnp.logical_or, "logical_xor": jnp.logical_xor,
}

_SELU_SCALE = 1.0507009873554804934193349852946


def softsign(x):
    return x / (1.0 + jnp.abs(x))


# at 0 the slopes TF takes: abs 0 (jnp.abs: 1), selu the positive side's (jax.nn.selu: the negative side's); a relu
# before them makes exact zeros common
def abs_(x):
    return x * jnp.sign(x)


def selu(x):
    return jnp.where(x >= 0, _SELU_SCALE * x, jax.nn.selu(x))


UNARY = {
    "relu": jax.nn.relu, "relu6": jax.nn.relu6, "sigmoid": jax.nn.sigmoid, "tanh": jnp.tanh, "exp": jnp.exp,
    "log": jnp.log, "sqrt": jnp.sqrt, "rsqrt": lax.rsqrt, "square": jnp.square,
    "gelu": lambda x: jax.nn.gelu(x, approximate=False), "softplus": jax.nn.softplus, "softsign": softsign,
    "silu": jax.nn.silu, "elu": jax.nn.elu, "selu": selu, "hard_sigmoid": lambda x: jax.nn.relu6(x + 3.0) / 6.0,
    "negative": jnp.negative, "abs": abs_, "identity": lambda x: x,
    "erf": lax.erf, "log1p": jnp.log1p, "expm1": jnp.expm1, "sin": jnp.sin, "cos": jnp.cos, "floor": jnp.floor,
    "ceil": jnp.ceil, "round": jnp.round, "sign": jnp.sign, "stop_gradient": lax.stop_gradient,
    "logical_not": jnp.logical_not, "isnan": jnp.isnan, "isfinite": jnp.isfinite,
}


def binary(node, a, b, ctx):
    return BINARY[node.op.name](a, b)


def unary(node, x, ctx):
    return UNARY[node.op.name](x)


def leaky_relu(node, x, ctx):
    # TF's: alpha * x at 0 too, and gradient alpha there (jax.nn.leaky_relu takes the x >= 0 branch at 0)
    return jnp.where(x > 0, x, node.attrs.get("alpha", 0.2) * x)


def cast(node, x, ctx):
    return x.astype(array_dtype(node.attrs["dtype"]))


def where(node, condition, a, b, ctx):
    return jnp.where(condition, a, b)


def fill_like(node, x, ctx):
    return jnp.full(x.shape, node.attrs["value"], array_dtype(node.attrs["dtype"]))


def constant(node, ctx):
    return ctx.constant(node.attrs["value"], jax_dtype(node.attrs["dtype"]))


KERNELS = {**{n: binary for n in BINARY}, **{n: unary for n in UNARY},
           "leaky_relu": leaky_relu, "cast": cast, "constant": constant, "where": where, "fill_like": fill_like}
