"""Regression metrics: Keras 3's functions (on host arrays and on Blobs alike), the classes that average them, and
R2Score, whose state is per-output sums."""
import math
import warnings

import numpy as np

from ..errors import ConfigError, InputError
from . import arrays as A
from .base import Metric, Wrapped


def _pair(y_true, y_pred):
    return A.same_rank(A.cast(y_true, A.dtype_of(y_pred)), y_pred)


def mean_squared_error(y_true, y_pred):
    y_true, y_pred = _pair(y_true, y_pred)
    return A.mean(A.square(y_true - y_pred))


def mean_absolute_error(y_true, y_pred):
    y_true, y_pred = _pair(y_true, y_pred)
    return A.mean(A.abs(y_true - y_pred))


def mean_absolute_percentage_error(y_true, y_pred):
    y_true, y_pred = _pair(y_true, y_pred)
    return 100.0 * A.mean(A.abs((y_true - y_pred) / A.maximum(A.abs(y_true), A.EPSILON)))


def mean_squared_logarithmic_error(y_true, y_pred):
    y_true, y_pred = _pair(y_true, y_pred)
    first, second = A.log(A.maximum(y_pred, A.EPSILON) + 1.0), A.log(A.maximum(y_true, A.EPSILON) + 1.0)
    return A.mean(A.square(first - second))


def log_cosh(y_true, y_pred):
    """``log(cosh(y_pred - y_true))``, averaged over the last axis, as ``x + softplus(-2x) - log(2)``."""
    y_true, y_pred = _pair(y_true, y_pred)
    x = y_pred - y_true
    return A.mean(x + A.softplus(x * -2.0) - math.log(2.0))


def _squared_error(y_true, y_pred):
    y_true, y_pred = _pair(y_true, y_pred)
    return A.square(y_pred - y_true)


def _normalize(x, axis):
    """``x`` over its L2 norm along ``axis`` (Keras' ``normalize``: at most ``1 / epsilon`` times ``x``)."""
    return x * A.minimum(A.rsqrt(A.total(A.square(x), axis, keepdims=True)), 1.0 / A.EPSILON)


def cosine_similarity(y_true, y_pred, axis=-1):
    y_true, y_pred = _pair(y_true, y_pred)
    return A.total(_normalize(y_true, axis) * _normalize(y_pred, axis), axis)


class MeanSquaredError(Wrapped):
    _direction = "down"
    fn = staticmethod(mean_squared_error)

    def __init__(self, name="mean_squared_error", dtype=None):
        super().__init__(name, dtype)


class MeanAbsoluteError(Wrapped):
    _direction = "down"
    fn = staticmethod(mean_absolute_error)

    def __init__(self, name="mean_absolute_error", dtype=None):
        super().__init__(name, dtype)


class MeanAbsolutePercentageError(Wrapped):
    _direction = "down"
    fn = staticmethod(mean_absolute_percentage_error)

    def __init__(self, name="mean_absolute_percentage_error", dtype=None):
        super().__init__(name, dtype)


class MeanSquaredLogarithmicError(Wrapped):
    _direction = "down"
    fn = staticmethod(mean_squared_logarithmic_error)

    def __init__(self, name="mean_squared_logarithmic_error", dtype=None):
        super().__init__(name, dtype)


class LogCoshError(Wrapped):
    _direction = "down"
    fn = staticmethod(log_cosh)

    def __init__(self, name="logcosh", dtype=None):
        super().__init__(name, dtype)


class RootMeanSquaredError(Wrapped):
    """The square root of the mean squared error."""
    _direction = "down"
    fn = staticmethod(_squared_error)

    def __init__(self, name="root_mean_squared_error", dtype=None):
        super().__init__(name, dtype)

    def _result(self, state):
        return np.sqrt(super()._result(state))


class CosineSimilarity(Wrapped):
    """The mean cosine of the angle between labels and predictions along ``axis``."""
    _direction = "up"
    fn = staticmethod(cosine_similarity)

    def __init__(self, name="cosine_similarity", dtype=None, axis=-1):
        super().__init__(name, dtype, axis=axis)


_AGGREGATIONS = (None, "uniform_average", "variance_weighted_average")


class R2Score(Metric):
    """The coefficient of determination per output, averaged as ``class_aggregation`` says; ``num_regressors`` > 0
    gives the adjusted score.  Its state: per output the (weighted) sums of ``y``, ``y**2``, the squared errors
    and the weights, and the number of entries seen."""
    _direction = "up"

    def __init__(self, class_aggregation="uniform_average", num_regressors=0, name="r2_score", dtype=None):
        if class_aggregation not in _AGGREGATIONS:
            raise ConfigError(f"R2Score: class_aggregation expected one of {_AGGREGATIONS}, received "
                              f"{class_aggregation!r}")
        if num_regressors < 0:
            raise ConfigError(f"R2Score: num_regressors expected a value >= 0, received {num_regressors!r}")
        self.class_aggregation, self.num_regressors = class_aggregation, num_regressors
        self._outputs = None
        super().__init__(name, dtype)

    @property
    def scalar_result(self):
        return self.class_aggregation is not None

    def _shape(self, y_true, y_pred):
        y_true, y_pred = _pair(y_true, y_pred)
        if len(A.shape(y_true)) != 2 or len(A.shape(y_pred)) != 2:
            raise InputError(f"metric {self.name!r} (R2Score): expected 2D labels and predictions of shape "
                             f"(batch_size, output_dim), received {A.shape(y_true)} and {A.shape(y_pred)}")
        self._outputs = A.shape(y_pred)[-1]
        return y_true, y_pred

    def _parts(self, y_true, y_pred, sample_weight):
        y_true, y_pred = self._shape(y_true, y_pred)
        n = self._outputs
        weight = 1.0
        if sample_weight is not None:
            weight = sample_weight[:, None] if sample_weight.ndim == 1 else sample_weight
            weight = np.broadcast_to(weight, y_true.shape).astype(y_true.dtype)
        weighted = y_true * weight
        parts = A.columns(weighted, n) + A.columns(y_true * weighted, n) + \
            A.columns(A.square(y_true - y_pred) * weight, n)
        if A.is_blob(y_pred):       # the weights and the count come from the number of examples
            return parts
        return parts + A.columns(np.broadcast_to(weight, y_true.shape), n) + [y_true.size]

    def _step_sums(self, sums, rows):
        return sums + [rows] * self._outputs + [rows * self._outputs]

    def _result(self, state):
        n = (len(state) - 1) // 4
        total_y, total_y2, residual, count = (state[k * n:(k + 1) * n] for k in range(4))
        with np.errstate(divide="ignore", invalid="ignore"):
            mean = total_y / count
            spread = total_y2 - total_y * mean
            raw = 1 - residual / spread
        raw = np.where(np.isinf(raw), 0.0, raw)
        if self.class_aggregation == "uniform_average":
            score = np.mean(raw)
        elif self.class_aggregation == "variance_weighted_average":
            score = np.sum(spread * raw) / np.sum(spread)
        else:
            score = raw
        samples = state[-1]
        if self.num_regressors:
            if self.num_regressors > samples - 1:
                warnings.warn("More independent predictors than datapoints in adjusted R2 score. Falling back to "
                              "standard R2 score.", stacklevel=3)
            elif self.num_regressors == samples - 1:
                warnings.warn("Division by zero in Adjusted R2 score. Falling back to standard R2 score.",
                              stacklevel=3)
            else:
                score = 1 - (1 - score) * (samples - 1) / (samples - self.num_regressors - 1)
        return score

    def get_config(self):
        return {**super().get_config(), "class_aggregation": self.class_aggregation,
                "num_regressors": self.num_regressors}
