"""Probabilistic metrics: cross-entropies, KL divergence and Poisson, as Keras 3's functions (on host arrays and on
Blobs alike) and the classes that average them.  Probabilities are clipped into [epsilon, 1 - epsilon] as Keras'
TensorFlow backend clips them."""
from ..errors import ConfigError
from . import arrays as A
from .base import Wrapped


def _clipped(p):
    return A.clip(p, A.EPSILON, 1.0 - A.EPSILON)


def binary_crossentropy(y_true, y_pred, from_logits=False, label_smoothing=0.0, axis=-1):
    y_true, y_pred = A.same_rank(A.cast(y_true, A.dtype_of(y_pred)), y_pred)
    if label_smoothing:
        y_true = y_true * (1.0 - label_smoothing) + 0.5 * label_smoothing
    if from_logits:     # max(x, 0) - x * y + log(1 + exp(-|x|))
        values = A.maximum(y_pred, 0.0) - y_pred * y_true + A.softplus(-A.abs(y_pred))
    else:
        p = _clipped(y_pred)
        values = -(y_true * A.log(p) + (1.0 - y_true) * A.log(1.0 - p))
    return A.mean(values, axis)


def _last_axis(axis, y_pred, what):
    if axis not in (-1, len(A.shape(y_pred)) - 1):
        raise ConfigError(f"{what}: axis expected -1 (the class axis last), received {axis!r}")


def categorical_crossentropy(y_true, y_pred, from_logits=False, label_smoothing=0.0, axis=-1):
    _last_axis(axis, y_pred, "categorical_crossentropy")
    y_true = A.cast(y_true, A.dtype_of(y_pred))
    if label_smoothing:
        y_true = y_true * (1.0 - label_smoothing) + label_smoothing / A.shape(y_true)[-1]
    if from_logits:
        return -A.total(y_true * A.log_softmax(y_pred))
    p = _clipped(y_pred / A.total(y_pred, keepdims=True))
    return -A.total(y_true * A.log(p))


def sparse_categorical_crossentropy(y_true, y_pred, from_logits=False, axis=-1):
    """From probabilities, ``-log(q_y / sum(q))`` of the clipped probabilities ``q`` (Keras' TensorFlow form)."""
    _last_axis(axis, y_pred, "sparse_categorical_crossentropy")
    if len(A.shape(y_true)) == len(A.shape(y_pred)) and A.shape(y_true)[-1] == 1:
        y_true = A.squeeze_last(y_true)
    logits = y_pred if from_logits else A.log(_clipped(y_pred))
    return -A.total(A.one_hot(y_true, A.shape(y_pred)[-1], y_pred) * A.log_softmax(logits))


def kl_divergence(y_true, y_pred):
    y_true = A.clip(A.cast(y_true, A.dtype_of(y_pred)), A.EPSILON, 1.0)
    y_pred = A.clip(y_pred, A.EPSILON, 1.0)
    return A.total(y_true * A.log(y_true / y_pred))


def poisson(y_true, y_pred):
    y_true = A.cast(y_true, A.dtype_of(y_pred))
    return A.mean(y_pred - y_true * A.log(y_pred + A.EPSILON))


class BinaryCrossentropy(Wrapped):
    _direction = "down"
    fn = staticmethod(binary_crossentropy)

    def __init__(self, name="binary_crossentropy", dtype=None, from_logits=False, label_smoothing=0):
        super().__init__(name, dtype, from_logits=from_logits, label_smoothing=label_smoothing)


class CategoricalCrossentropy(Wrapped):
    _direction = "down"
    fn = staticmethod(categorical_crossentropy)

    def __init__(self, name="categorical_crossentropy", dtype=None, from_logits=False, label_smoothing=0, axis=-1):
        if axis != -1:
            raise ConfigError(f"CategoricalCrossentropy: axis expected -1 (the class axis last), received {axis!r}")
        super().__init__(name, dtype, from_logits=from_logits, label_smoothing=label_smoothing, axis=axis)


class SparseCategoricalCrossentropy(Wrapped):
    _direction = "down"
    fn = staticmethod(sparse_categorical_crossentropy)

    def __init__(self, name="sparse_categorical_crossentropy", dtype=None, from_logits=False, ignore_class=None,
                 axis=-1):
        if ignore_class is not None:
            raise ConfigError(f"SparseCategoricalCrossentropy: ignore_class expected None (labels to leave out are "
                              f"not supported), received {ignore_class!r}; give those examples sample_weight 0")
        if axis != -1:
            raise ConfigError(f"SparseCategoricalCrossentropy: axis expected -1 (the class axis last), received "
                              f"{axis!r}")
        super().__init__(name, dtype, from_logits=from_logits, axis=axis)

    def get_config(self):
        return {**super().get_config(), "ignore_class": None}


class KLDivergence(Wrapped):
    _direction = "down"
    fn = staticmethod(kl_divergence)

    def __init__(self, name="kl_divergence", dtype=None):
        super().__init__(name, dtype)


class Poisson(Wrapped):
    _direction = "down"
    fn = staticmethod(poisson)

    def __init__(self, name="poisson", dtype=None):
        super().__init__(name, dtype)
