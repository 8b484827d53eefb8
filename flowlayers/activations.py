"""Keras 3's activations: functions of a tensor with Keras' signatures and defaults, on Blobs inside a model (built
from flowlayers' ops) and on numbers and numpy arrays at once; ``get`` takes them by name, by function or as
``serialize`` wrote them (``None``: linear).

    flow.layers.Dense(4, activation="gelu")             # Keras' exact gelu (approximate=False)
    flow.layers.Dense(4, activation=flow.activations.leaky_relu)
"""
from . import missing, ops
from .errors import LayerError
from .ops import elementwise, nn
from .ops.dispatch import dtype_of


def linear(x):
    """``x`` unchanged."""
    return x


def relu(x, negative_slope=0.0, max_value=None, threshold=0.0):
    """Keras' ``relu``: ``x`` above ``threshold`` (0 below it), at most ``max_value``; below, ``negative_slope``
    times ``x - threshold`` is added."""
    if negative_slope == 0.0 and max_value is None and threshold == 0.0:
        return ops.relu(x)
    if negative_slope != 0.0 and max_value is None and threshold == 0.0:
        return ops.leaky_relu(x, negative_slope=negative_slope)
    if threshold != 0.0:
        y = ops.where(ops.greater(x, float(threshold)), x, ops.zeros_like(x))
    else:
        y = ops.relu(x)
    if max_value is not None:
        y = ops.clip(y, 0.0, float(max_value))
    if negative_slope != 0.0:
        y = ops.subtract(y, ops.multiply(ops.relu(ops.add(ops.negative(x), float(threshold))), float(negative_slope)))
    return y


def leaky_relu(x, negative_slope=0.2):
    return ops.leaky_relu(x, negative_slope=negative_slope)


def relu6(x):
    return ops.relu6(x)


def elu(x, alpha=1.0):
    return ops.elu(x, alpha=alpha)


def selu(x):
    return ops.selu(x)


def celu(x, alpha=1.0):
    return ops.celu(x, alpha=alpha)


def gelu(x, approximate=False):
    """Keras' ``gelu``: exactly ``x * Phi(x)`` by default (the tanh approximation with ``approximate=True``)."""
    return ops.gelu(x, approximate=approximate)


def glu(x, axis=-1):
    return ops.glu(x, axis=axis)


def sigmoid(x):
    return ops.sigmoid(x)


def tanh(x):
    return ops.tanh(x)


def softplus(x):
    return ops.softplus(x)


def softsign(x):
    return ops.softsign(x)


def silu(x):
    """``x * sigmoid(x)``."""
    return ops.silu(x)


swish = silu


def hard_sigmoid(x):
    """``relu6(x + 3) / 6``."""
    return ops.hard_sigmoid(x)


def hard_silu(x):
    """``x * hard_sigmoid(x)``."""
    return ops.hard_silu(x)


hard_swish = hard_silu


def exponential(x):
    return ops.exp(x)


def log_sigmoid(x):
    return ops.log_sigmoid(x)


def softmax(x, axis=-1):
    return ops.softmax(x, axis=axis)


def log_softmax(x, axis=-1):
    return ops.log_softmax(x, axis=axis)


def mish(x):
    """``x * tanh(softplus(x))``."""
    return ops.multiply(x, ops.tanh(ops.softplus(x)))


def hard_tanh(x):
    """``x`` clipped into [-1, 1]."""
    return ops.clip(x, -1.0, 1.0)


def hard_shrink(x, threshold=0.5):
    """``x`` where ``|x| > threshold``, else 0."""
    return ops.where(ops.greater(ops.abs(x), float(threshold)), x, ops.zeros_like(x))


def soft_shrink(x, threshold=0.5):
    """``x - threshold`` above ``threshold``, ``x + threshold`` below ``-threshold``, else 0."""
    t = float(threshold)
    shrunk = ops.where(ops.greater(x, t), ops.subtract(x, t), ops.zeros_like(x))
    return ops.where(ops.less(x, -t), ops.add(x, t), shrunk)


def tanh_shrink(x):
    """``x - tanh(x)``."""
    return ops.subtract(x, ops.tanh(x))


def squareplus(x, b=4):
    """``(x + sqrt(x ** 2 + b)) / 2``."""
    if b < 0:
        raise LayerError(f"squareplus: b expected a number >= 0, received {b!r}")
    return ops.multiply(ops.add(x, ops.sqrt(ops.add(ops.square(x), float(b)))), 0.5)


def sparse_plus(x):
    """0 below -1, ``x`` above 1, ``(x + 1) ** 2 / 4`` between."""
    middle = ops.multiply(ops.square(ops.add(x, 1.0)), 0.25)
    upper = ops.where(ops.greater_equal(x, 1.0), x, middle)
    return ops.where(ops.less_equal(x, -1.0), ops.zeros_like(x), upper)


def sparse_sigmoid(x):
    """``(x + 1) / 2`` clipped into [0, 1]."""
    return ops.multiply(ops.clip(ops.add(x, 1.0), 0.0, 2.0), 0.5)


def sparsemax(x, axis=-1):
    """The Euclidean projection of ``x`` onto the probability simplex along ``axis``: ``max(x - tau, 0)``."""
    ordered = ops.negative(ops.sort(ops.negative(x), axis=axis))
    sums = ops.cumsum(ordered, axis=axis)
    n = ops.shape(x)[axis]
    if n is None:
        raise LayerError(f"sparsemax: axis expected an axis of known size, received axis={axis!r} of shape "
                         f"{tuple(ops.shape(x))}")
    rank_shape = [1] * ops.ndim(x)
    rank_shape[axis] = n
    ranks = ops.reshape(ops.arange(1, n + 1, dtype=dtype_of(x)), rank_shape)
    support = ops.greater(ordered, ops.divide(ops.subtract(sums, 1.0), ranks))
    inside = ops.cast(support, dtype_of(x))
    k = ops.sum(inside, axis=axis, keepdims=True)
    tau = ops.divide(ops.subtract(ops.sum(ops.multiply(sums, inside), axis=axis, keepdims=True), 1.0), k)
    return ops.maximum(ops.subtract(x, tau), 0.0)


def threshold(x, threshold, default_value):  # noqa: A002 - Keras' argument name
    """``x`` where it is above ``threshold``, else ``default_value``."""
    return ops.where(ops.greater(x, float(threshold)), x, ops.full_like(x, float(default_value)))


_ALL = (linear, relu, leaky_relu, relu6, elu, selu, celu, gelu, glu, sigmoid, tanh, softplus, softsign, silu,
        hard_sigmoid, hard_silu, exponential, log_sigmoid, softmax, log_softmax, mish, hard_tanh, hard_shrink,
        soft_shrink, tanh_shrink, squareplus, sparse_plus, sparse_sigmoid, sparsemax, threshold)
_BY_NAME = {**{f.__name__: f for f in _ALL}, "swish": silu, "hard_swish": hard_silu}

# the graph functions an activation was given as before these existed (``flow.nn.relu``): named as Keras names them
_OPS = {"relu": elementwise.relu, "relu6": elementwise.relu6, "sigmoid": elementwise.sigmoid,
        "tanh": elementwise.tanh, "gelu": elementwise.gelu, "softplus": elementwise.softplus,
        "softsign": elementwise.softsign, "silu": elementwise.silu, "elu": elementwise.elu, "selu": elementwise.selu,
        "hard_sigmoid": elementwise.hard_sigmoid, "leaky_relu": elementwise.leaky_relu,
        "exponential": elementwise.exp, "softmax": nn.softmax, "log_softmax": nn.log_softmax}


def get(identifier, what="activation"):
    """The activation of a name (Keras' names), a function, ``serialize``'s output, or None (linear)."""
    if identifier is None:
        return linear
    if isinstance(identifier, dict):
        return deserialize(identifier)
    if callable(identifier):
        return identifier
    if isinstance(identifier, str) and identifier in _BY_NAME:
        return _BY_NAME[identifier]
    raise LayerError(f"{what}: expected a callable or one of {sorted(_BY_NAME)}, received {identifier!r}")


def name_of(fn):
    for table in (_BY_NAME, _OPS):
        for name, f in table.items():
            if f is fn:
                return name
    return getattr(fn, "__name__", repr(fn))


def serialize(activation):
    """The name of an activation (Keras' form for its own)."""
    name = name_of(activation)
    if name not in _BY_NAME:
        raise LayerError(f"activations.serialize: expected one of flow.activations' functions, received "
                         f"{activation!r}")
    return name


def deserialize(config, custom_objects=None):
    """The activation of a name, or of ``{"class_name": "function", "config": name}`` (Keras' saved form);
    ``custom_objects``: your own by name."""
    table = {**_BY_NAME, **(custom_objects or {})}
    name = config.get("config") if isinstance(config, dict) else config
    if not isinstance(name, str) or name not in table:
        raise LayerError(f"activations.deserialize: expected one of {sorted(table)}, received {config!r}")
    return table[name]


def __getattr__(name):
    """A Keras activation flowlayers lacks: a LayerError naming it and what to use instead."""
    return missing.refuse("activations", name, LayerError, globals())

