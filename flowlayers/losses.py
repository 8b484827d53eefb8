"""Losses as specs: ``loss(y_true, y_pred)`` builds the per-example loss Blob; ``fit`` minimises its mean.

    model.compile(loss=flow.losses.SparseCategoricalCrossentropy(from_logits=True))
    model.compile(loss="sparse_categorical_crossentropy")
"""
from . import dtypes
from .errors import ConfigError
from .ops import elementwise as ew, nn, reduce


class Loss:
    def __init__(self, from_logits=False, name=None):
        self.from_logits = from_logits
        self.name = name or _snake(type(self).__name__)

    def label_spec(self, y_pred):
        """(shape, dtype) of the label placeholder for predictions ``y_pred``."""
        return y_pred.shape, y_pred.dtype

    def __call__(self, y_true, y_pred):
        raise NotImplementedError

    def get_config(self):
        return {"name": self.name, "from_logits": self.from_logits}


def _snake(name):
    import re

    return re.sub(r"(?<!^)(?=[A-Z])", "_", name).lower()


def _log_probs(y_pred, from_logits):
    if from_logits:
        return nn.log_softmax(y_pred)
    eps = 1e-7   # Keras clips probabilities the same way
    return ew.log(ew.minimum(ew.maximum(y_pred, eps), 1.0 - eps))


class SparseCategoricalCrossentropy(Loss):
    def label_spec(self, y_pred):
        return y_pred.shape[:-1], dtypes.int32

    def __call__(self, y_true, y_pred):
        if self.from_logits:
            return nn.sparse_softmax_cross_entropy_with_logits(y_true, y_pred)
        one_hot = nn.one_hot(y_true, y_pred.shape[-1], y_pred.dtype)
        return ew.negative(reduce.reduce_sum(one_hot * _log_probs(y_pred, False), axis=-1))


class CategoricalCrossentropy(Loss):
    def __call__(self, y_true, y_pred):
        if self.from_logits:
            return nn.softmax_cross_entropy_with_logits(y_true, y_pred)
        return ew.negative(reduce.reduce_sum(y_true * _log_probs(y_pred, False), axis=-1))


class BinaryCrossentropy(Loss):
    def __call__(self, y_true, y_pred):
        if self.from_logits:
            per = nn.sigmoid_cross_entropy_with_logits(y_true, y_pred)
        else:
            p = ew.minimum(ew.maximum(y_pred, 1e-7), 1.0 - 1e-7)
            per = ew.negative(y_true * ew.log(p) + (1.0 - y_true) * ew.log(1.0 - p))
        return reduce.reduce_mean(per, axis=-1)


class MeanSquaredError(Loss):
    def __call__(self, y_true, y_pred):
        return reduce.reduce_mean(ew.square(y_pred - y_true), axis=-1)


class MeanAbsoluteError(Loss):
    def __call__(self, y_true, y_pred):
        return reduce.reduce_mean(ew.abs(y_pred - y_true), axis=-1)


_BY_NAME = {
    "sparse_categorical_crossentropy": SparseCategoricalCrossentropy,
    "categorical_crossentropy": CategoricalCrossentropy, "binary_crossentropy": BinaryCrossentropy,
    "mean_squared_error": MeanSquaredError, "mse": MeanSquaredError, "mean_absolute_error": MeanAbsoluteError,
    "mae": MeanAbsoluteError,
}


def get(identifier):
    if isinstance(identifier, Loss):
        return identifier
    if isinstance(identifier, str) and identifier in _BY_NAME:
        return _BY_NAME[identifier]()
    raise ConfigError(f"loss: expected a flow.losses.* instance or one of {sorted(_BY_NAME)}, received "
                      f"{identifier!r}")
