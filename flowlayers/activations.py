"""Activations by name or callable: ``"relu"``, ``flow.nn.relu``, ``None``."""
from .errors import LayerError
from .ops import elementwise, nn


def _linear(x):
    return x


_BY_NAME = {
    "linear": _linear, "relu": elementwise.relu, "relu6": elementwise.relu6, "sigmoid": elementwise.sigmoid,
    "tanh": elementwise.tanh, "gelu": elementwise.gelu, "softplus": elementwise.softplus,
    "softsign": elementwise.softsign, "silu": elementwise.silu, "swish": elementwise.silu, "elu": elementwise.elu,
    "selu": elementwise.selu, "hard_sigmoid": elementwise.hard_sigmoid, "leaky_relu": elementwise.leaky_relu,
    "exponential": elementwise.exp, "softmax": nn.softmax, "log_softmax": nn.log_softmax,
}


def get(identifier, what="activation"):
    if identifier is None:
        return _linear
    if callable(identifier):
        return identifier
    if isinstance(identifier, str) and identifier in _BY_NAME:
        return _BY_NAME[identifier]
    raise LayerError(f"{what}: expected a callable or one of {sorted(_BY_NAME)}, received {identifier!r}")


def name_of(fn):
    for name, f in _BY_NAME.items():
        if f is fn:
            return name
    return getattr(fn, "__name__", repr(fn))
