"""Elementwise ops -> tf.math / tf.nn."""
import tensorflow as tf

from ..dtypes import tf_dtype

BINARY = {
    "add": tf.add, "subtract": tf.subtract, "multiply": tf.multiply, "divide": tf.divide,
    "maximum": tf.maximum, "minimum": tf.minimum, "equal": tf.equal, "greater": tf.greater, "pow": tf.pow,
    "not_equal": tf.not_equal, "greater_equal": tf.greater_equal, "floor_divide": tf.math.floordiv,
    "mod": tf.math.floormod, "logical_and": tf.logical_and, "logical_or": tf.logical_or,
    "logical_xor": tf.math.logical_xor,
}


def softsign(x):
    """``x / (1 + |x|)``, written out: DTensor has no layout propagation for tf.nn.softsign's gradient
    (SoftsignGrad), so a consistent-view step with it failed to compile."""
    return x / (1.0 + tf.abs(x))


UNARY = {
    "relu": tf.nn.relu, "relu6": tf.nn.relu6, "sigmoid": tf.sigmoid, "tanh": tf.tanh, "exp": tf.exp,
    "log": tf.math.log, "sqrt": tf.sqrt, "rsqrt": tf.math.rsqrt, "square": tf.square,
    "gelu": lambda x: tf.nn.gelu(x, approximate=False), "softplus": tf.nn.softplus, "softsign": softsign,
    "silu": tf.nn.silu, "elu": tf.nn.elu, "selu": tf.nn.selu, "hard_sigmoid": lambda x: tf.nn.relu6(x + 3.0) / 6.0,
    "negative": tf.negative, "abs": tf.abs, "identity": tf.identity,
    "erf": tf.math.erf, "log1p": tf.math.log1p, "expm1": tf.math.expm1, "sin": tf.sin, "cos": tf.cos,
    "floor": tf.floor, "ceil": tf.math.ceil, "round": tf.round, "sign": tf.sign, "stop_gradient": tf.stop_gradient,
    "logical_not": tf.logical_not, "isnan": tf.math.is_nan, "isfinite": tf.math.is_finite,
}


def binary(node, a, b, ctx):
    return BINARY[node.op.name](a, b)


def unary(node, x, ctx):
    return UNARY[node.op.name](x)


def leaky_relu(node, x, ctx):
    return tf.nn.leaky_relu(x, alpha=node.attrs.get("alpha", 0.2))


def cast(node, x, ctx):
    return tf.cast(x, tf_dtype(node.attrs["dtype"]))


def where(node, condition, a, b, ctx):
    # every operand given the result's rank (leading 1s): DTensor's select crashes the process (SIGSEGV, TF 2.21)
    # on a rank-0 condition beside operands split over the mesh
    rank = max(len(t.shape) for t in (condition, a, b))
    return tf.where(*(_ranked(t, rank) for t in (condition, a, b)))


def _ranked(t, rank):
    for _ in range(rank - len(t.shape)):
        t = tf.expand_dims(t, 0)
    return t


def fill_like(node, x, ctx):
    # zeros_like keeps the input's layout in the consistent view, and gives it no gradient
    dtype = tf_dtype(node.attrs["dtype"])
    zeros, value = tf.zeros_like(x, dtype), tf.constant(node.attrs["value"], dtype)
    return tf.logical_or(zeros, value) if dtype == tf.bool else zeros + value


def constant(node, ctx):
    return ctx.constant(node.attrs["value"], tf_dtype(node.attrs["dtype"]))


KERNELS = {**{n: binary for n in BINARY}, **{n: unary for n in UNARY},
           "leaky_relu": leaky_relu, "cast": cast, "constant": constant, "where": where, "fill_like": fill_like}
