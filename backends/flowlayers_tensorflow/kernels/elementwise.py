"""Elementwise ops -> tf.math / tf.nn."""
import tensorflow as tf

from ..dtypes import tf_dtype

BINARY = {
    "add": tf.add, "subtract": tf.subtract, "multiply": tf.multiply, "divide": tf.divide,
    "maximum": tf.maximum, "minimum": tf.minimum, "equal": tf.equal, "greater": tf.greater, "pow": tf.pow,
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
}


def binary(node, a, b, ctx):
    return BINARY[node.op.name](a, b)


def unary(node, x, ctx):
    return UNARY[node.op.name](x)


def leaky_relu(node, x, ctx):
    return tf.nn.leaky_relu(x, alpha=node.attrs.get("alpha", 0.2))


def cast(node, x, ctx):
    return tf.cast(x, tf_dtype(node.attrs["dtype"]))


def constant(node, ctx):
    return ctx.constant(node.attrs["value"], tf_dtype(node.attrs["dtype"]))


KERNELS = {**{n: binary for n in BINARY}, **{n: unary for n in UNARY},
           "leaky_relu": leaky_relu, "cast": cast, "constant": constant}
