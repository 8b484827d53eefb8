"""Metrics as specs: a per-example value Blob built in the step, averaged exactly on the host.

Every device returns the sum of its values; the host adds them and divides
by the number of examples seen, so a metric is the same in every view.
"""

from . import contract, dtypes, losses
from .errors import ConfigError
from .framework import naming
from .ops import elementwise as ew, reduce


class Metric:
    def __init__(self, name=None):
        self.name = name or naming.snake_case(type(self).__name__)     # Keras' default names
        self.reset_state()

    def values(self, y_true, y_pred):
        """Per-example metric values (a Blob with the batch as its first dim)."""
        raise NotImplementedError

    def reset_state(self):
        self.total, self.count = 0.0, 0

    def update(self, total, count):
        """Add a batch's sum over ``count`` examples (or several batches' sums, stacked, over all their examples).
        The sum may be an engine's array still being computed: it is read on the host only when ``total`` is (an
        engine that dispatches asynchronously runs ahead)."""
        self._pending.append(total)
        self.count += int(count)

    @property
    def total(self):
        if self._pending:
            self._total += contract.total(self._pending)
            self._pending = []
        return self._total

    @total.setter
    def total(self, value):
        self._total, self._pending = float(value), []

    def result(self):
        return self.total / self.count if self.count else 0.0

    def deferred_result(self):
        """``result()`` as a ``Deferred``: read on the host only when it is used."""
        base, pending, count = self._total, list(self._pending), self.count
        if not pending:
            return base / count if count else 0.0
        return Deferred(lambda: (base + contract.total(pending)) / count)

    def get_config(self):
        return {"name": self.name}


class Deferred:
    """A metric's value whose sums are still on the engine: ``float()`` reads them, once.  ``fit`` hands these to
    callbacks that keep epoch logs without reading them (History), so that epochs follow each other without the
    host waiting for the engine in between."""
    __slots__ = ("_read", "_value")

    def __init__(self, read):
        self._read, self._value = read, None

    def __float__(self):
        if self._value is None:
            self._value, self._read = float(self._read()), None
        return self._value

    def __format__(self, spec):
        return format(float(self), spec)

    def __repr__(self):
        return repr(float(self))


def _float(b):
    return ew.cast(b, dtypes.float32)


_upcast = losses.in_loss_dtype      # 16-bit predictions are measured in float32, as Keras' metrics take them


class SparseCategoricalAccuracy(Metric):
    def values(self, y_true, y_pred):
        return _float(ew.equal(reduce.argmax(y_pred, -1), ew.cast(y_true, dtypes.int64)))


class CategoricalAccuracy(Metric):
    def values(self, y_true, y_pred):
        return _float(ew.equal(reduce.argmax(y_pred, -1), reduce.argmax(y_true, -1)))


class BinaryAccuracy(Metric):
    def __init__(self, name=None, threshold=0.5):
        self.threshold = threshold
        super().__init__(name)

    def get_config(self):
        return {**super().get_config(), "threshold": self.threshold}

    def values(self, y_true, y_pred):
        predicted = ew.cast(ew.greater(_upcast(y_pred), self.threshold), y_true.dtype)
        return reduce.reduce_mean(_float(ew.equal(predicted, y_true)), axis=-1)


class MeanSquaredError(Metric):
    def values(self, y_true, y_pred):
        return reduce.reduce_mean(ew.square(_upcast(y_pred) - y_true), axis=-1)


class MeanAbsoluteError(Metric):
    def values(self, y_true, y_pred):
        return reduce.reduce_mean(ew.abs(_upcast(y_pred) - y_true), axis=-1)


class Mean(Metric):
    """The running mean of a per-example Blob (used for the loss)."""


_BY_NAME = {
    "sparse_categorical_accuracy": SparseCategoricalAccuracy, "categorical_accuracy": CategoricalAccuracy,
    "binary_accuracy": BinaryAccuracy, "mse": MeanSquaredError, "mean_squared_error": MeanSquaredError,
    "mae": MeanAbsoluteError, "mean_absolute_error": MeanAbsoluteError,
}


def get(identifier, loss=None):
    """A Metric from an instance or a name; 'accuracy'/'acc' follows the loss, as in Keras, and a metric given
    by name is reported under that name ('acc' -> 'acc', as History keys and logs in Keras)."""
    if isinstance(identifier, Metric):
        return identifier
    if isinstance(identifier, str) and identifier.lower() in ("accuracy", "acc"):
        kind = {losses.SparseCategoricalCrossentropy: SparseCategoricalAccuracy,
                losses.CategoricalCrossentropy: CategoricalAccuracy,
                losses.BinaryCrossentropy: BinaryAccuracy}.get(type(loss), SparseCategoricalAccuracy)
        return kind(name=identifier)     # Keras names a metric given by name after that name
    if isinstance(identifier, str) and identifier in _BY_NAME:
        return _BY_NAME[identifier](name=identifier)
    raise ConfigError(f"metric: expected a flow.metrics.* instance, 'accuracy' or one of {sorted(_BY_NAME)}, "
                      f"received {identifier!r}")
