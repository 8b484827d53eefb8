"""Regression losses: Keras 3's functions (on numpy arrays and on Blobs alike) and the classes that average them."""
import math

from .. import ops
from ..errors import ConfigError
from .base import Loss, pair

EPSILON = 1e-7     # Keras' backend.epsilon()


def mean_squared_error(y_true, y_pred):
    y_true, y_pred = pair(y_true, y_pred)
    return ops.mean(ops.square(ops.subtract(y_true, y_pred)), axis=-1)


def mean_absolute_error(y_true, y_pred):
    y_true, y_pred = pair(y_true, y_pred)
    return ops.mean(ops.abs(ops.subtract(y_true, y_pred)), axis=-1)


def mean_absolute_percentage_error(y_true, y_pred):
    y_true, y_pred = pair(y_true, y_pred)
    diff = ops.abs(ops.divide(ops.subtract(y_true, y_pred), ops.maximum(ops.abs(y_true), EPSILON)))
    return ops.multiply(ops.mean(diff, axis=-1), 100.0)


def mean_squared_logarithmic_error(y_true, y_pred):
    y_true, y_pred = pair(y_true, y_pred)
    first = ops.log(ops.add(ops.maximum(y_pred, EPSILON), 1.0))
    second = ops.log(ops.add(ops.maximum(y_true, EPSILON), 1.0))
    return ops.mean(ops.square(ops.subtract(first, second)), axis=-1)


def huber(y_true, y_pred, delta=1.0):
    """``0.5 e**2`` where ``|e| <= delta``, ``delta |e| - 0.5 delta**2`` beyond; averaged over the last axis."""
    y_true, y_pred = pair(y_true, y_pred)
    error = ops.subtract(y_pred, y_true)
    quadratic = ops.multiply(ops.square(error), 0.5)
    linear = ops.subtract(ops.multiply(ops.abs(error), float(delta)), 0.5 * float(delta) ** 2)
    return ops.mean(ops.where(ops.less_equal(ops.abs(error), float(delta)), quadratic, linear), axis=-1)


def log_cosh(y_true, y_pred):
    """``log(cosh(y_pred - y_true))`` averaged over the last axis, as ``x + softplus(-2x) - log(2)``."""
    y_true, y_pred = pair(y_true, y_pred)
    x = ops.subtract(y_pred, y_true)
    return ops.mean(ops.subtract(ops.add(x, ops.softplus(ops.multiply(x, -2.0))), math.log(2.0)), axis=-1)


def cosine_similarity(y_true, y_pred, axis=-1):
    """Minus the cosine of the angle between labels and predictions along ``axis``."""
    if isinstance(axis, bool) or not isinstance(axis, int):
        raise ConfigError(f"cosine_similarity: axis expected an int, received {axis!r}")
    y_true, y_pred = pair(y_true, y_pred)
    product = ops.multiply(ops.normalize(y_true, axis=axis), ops.normalize(y_pred, axis=axis))
    return ops.negative(ops.sum(product, axis=axis))


class MeanSquaredError(Loss):
    fn = staticmethod(mean_squared_error)

    def __init__(self, reduction="sum_over_batch_size", name="mean_squared_error", dtype=None):
        super().__init__(name, reduction, dtype)


class MeanAbsoluteError(Loss):
    fn = staticmethod(mean_absolute_error)

    def __init__(self, reduction="sum_over_batch_size", name="mean_absolute_error", dtype=None):
        super().__init__(name, reduction, dtype)


class MeanAbsolutePercentageError(Loss):
    fn = staticmethod(mean_absolute_percentage_error)

    def __init__(self, reduction="sum_over_batch_size", name="mean_absolute_percentage_error", dtype=None):
        super().__init__(name, reduction, dtype)


class MeanSquaredLogarithmicError(Loss):
    fn = staticmethod(mean_squared_logarithmic_error)

    def __init__(self, reduction="sum_over_batch_size", name="mean_squared_logarithmic_error", dtype=None):
        super().__init__(name, reduction, dtype)


class Huber(Loss):
    fn = staticmethod(huber)

    def __init__(self, delta=1.0, reduction="sum_over_batch_size", name="huber_loss", dtype=None):
        if isinstance(delta, bool) or not isinstance(delta, (int, float)) or delta < 0:
            raise ConfigError(f"Huber: delta expected a number >= 0, received {delta!r}")
        super().__init__(name, reduction, dtype)
        self.delta = float(delta)

    def fn_kwargs(self):
        return {"delta": self.delta}


class LogCosh(Loss):
    fn = staticmethod(log_cosh)

    def __init__(self, reduction="sum_over_batch_size", name="log_cosh", dtype=None):
        super().__init__(name, reduction, dtype)


class CosineSimilarity(Loss):
    fn = staticmethod(cosine_similarity)

    def __init__(self, axis=-1, reduction="sum_over_batch_size", name="cosine_similarity", dtype=None):
        if isinstance(axis, bool) or not isinstance(axis, int):
            raise ConfigError(f"CosineSimilarity: axis expected an int, received {axis!r}")
        super().__init__(name, reduction, dtype)
        self.axis = axis

    def fn_kwargs(self):
        return {"axis": self.axis}
