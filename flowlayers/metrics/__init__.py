"""Keras 3's metrics, usable on their own and in ``compile(metrics=[...])``.

On its own a metric computes on host arrays, as in Keras::

    m = flow.metrics.AUC()
    m.update_state(y_true, y_pred, sample_weight=None)
    m.result()          # a float (a numpy array for several values)
    m.reset_state()

In a model it is the same object: the step computes its statistics (sums over the batch's examples, added over
the replicas) and the metric adds them up on the host, so that its value is the same in every view and on every
device count.  A Keras metric flowlayers does not have is refused by name, saying what to use instead.
"""
from .. import losses
from ..errors import ConfigError
from .accuracy import (Accuracy, BinaryAccuracy, CategoricalAccuracy, SparseCategoricalAccuracy,  # noqa: F401
                       SparseTopKCategoricalAccuracy, TopKCategoricalAccuracy, binary_accuracy, categorical_accuracy,
                       sparse_categorical_accuracy, sparse_top_k_categorical_accuracy, top_k_categorical_accuracy)
from .base import Deferred, Mean, MeanMetricWrapper, Metric, Sum, not_of_predictions, snake_case  # noqa: F401
from .confusion import (AUC, F1Score, FalseNegatives, FalsePositives, FBetaScore, Precision,  # noqa: F401
                        PrecisionAtRecall, Recall, RecallAtPrecision, SensitivityAtSpecificity,
                        SpecificityAtSensitivity, TrueNegatives, TruePositives)
from .hinge import CategoricalHinge, Hinge, SquaredHinge  # noqa: F401
from .probabilistic import (BinaryCrossentropy, CategoricalCrossentropy, KLDivergence, Poisson,  # noqa: F401
                            SparseCategoricalCrossentropy, binary_crossentropy, categorical_crossentropy,
                            kl_divergence, poisson, sparse_categorical_crossentropy)
from .regression import (CosineSimilarity, LogCoshError, MeanAbsoluteError, MeanAbsolutePercentageError,  # noqa: F401
                         MeanSquaredError, MeanSquaredLogarithmicError, R2Score, RootMeanSquaredError, log_cosh,
                         mean_absolute_error, mean_absolute_percentage_error, mean_squared_error,
                         mean_squared_logarithmic_error)

# Keras' loss functions that are also its metric functions
binary_focal_crossentropy, categorical_focal_crossentropy = losses.binary_focal_crossentropy, \
    losses.categorical_focal_crossentropy
hinge, squared_hinge, categorical_hinge, huber = losses.hinge, losses.squared_hinge, losses.categorical_hinge, \
    losses.huber

_CLASSES = [v for v in list(globals().values()) if isinstance(v, type) and issubclass(v, Metric)
            and v not in (Metric, Mean, Sum, MeanMetricWrapper)]
# Keras' functions, each the per-example value of a class: compile takes them as that class (saved by its config)
_CLASS_OF_FUNCTION = {
    binary_accuracy: BinaryAccuracy, categorical_accuracy: CategoricalAccuracy,
    sparse_categorical_accuracy: SparseCategoricalAccuracy, top_k_categorical_accuracy: TopKCategoricalAccuracy,
    sparse_top_k_categorical_accuracy: SparseTopKCategoricalAccuracy, mean_squared_error: MeanSquaredError,
    mean_absolute_error: MeanAbsoluteError, mean_absolute_percentage_error: MeanAbsolutePercentageError,
    mean_squared_logarithmic_error: MeanSquaredLogarithmicError, log_cosh: LogCoshError,
    binary_crossentropy: BinaryCrossentropy, categorical_crossentropy: CategoricalCrossentropy,
    sparse_categorical_crossentropy: SparseCategoricalCrossentropy, kl_divergence: KLDivergence, poisson: Poisson,
    hinge: Hinge, squared_hinge: SquaredHinge, categorical_hinge: CategoricalHinge}

# Keras' names for a metric in compile(metrics=[...]): a class's name or its snake_case name, an alias
_BY_NAME = {**{f.__name__: c for f, c in _CLASS_OF_FUNCTION.items()},
            **{c.__name__: c for c in _CLASSES}, **{snake_case(c.__name__): c for c in _CLASSES},
            "bce": BinaryCrossentropy, "BCE": BinaryCrossentropy, "mse": MeanSquaredError, "MSE": MeanSquaredError,
            "mae": MeanAbsoluteError, "MAE": MeanAbsoluteError, "mape": MeanAbsolutePercentageError,
            "MAPE": MeanAbsolutePercentageError, "msle": MeanSquaredLogarithmicError,
            "MSLE": MeanSquaredLogarithmicError}

_ACCURACY_BY_LOSS = {losses.SparseCategoricalCrossentropy: SparseCategoricalAccuracy,
                     losses.CategoricalCrossentropy: CategoricalAccuracy,
                     losses.BinaryCrossentropy: BinaryAccuracy}


def get(identifier, loss=None):
    """A Metric from an instance, a name or a function of ``(y_true, y_pred)``, as ``compile`` takes them.
    ``'accuracy'``/``'acc'`` follows the loss, as in Keras; a metric given by name is reported under that name
    (``'acc'`` -> ``'acc'``, ``'AUC'`` -> ``'AUC'``), as in History keys and logs in Keras."""
    if isinstance(identifier, Metric):
        if not identifier.takes_predictions:
            raise not_of_predictions(identifier)
        return identifier
    if isinstance(identifier, str) and identifier.lower() in ("accuracy", "acc"):
        return _ACCURACY_BY_LOSS.get(type(loss), SparseCategoricalAccuracy)(name=identifier)
    if isinstance(identifier, str) and identifier in _BY_NAME:
        return _BY_NAME[identifier](name=identifier)
    if isinstance(identifier, dict) and "class_name" in identifier:
        return deserialize(identifier)
    if callable(identifier) and not isinstance(identifier, type):
        name = getattr(identifier, "__name__", None)
        if identifier in _CLASS_OF_FUNCTION:
            return _CLASS_OF_FUNCTION[identifier](name=name)
        return MeanMetricWrapper(identifier, name=name)
    if isinstance(identifier, str) and identifier in _MISSING:
        _refuse(identifier)
    raise ConfigError(f"metric: expected a flow.metrics.* instance, a function of (y_true, y_pred), 'accuracy' or "
                      f"one of {sorted(k for k in _BY_NAME if k == k.lower())}, received {identifier!r}")


def serialize(metric):
    """``{"class_name": ..., "config": ...}`` of a metric (Keras' form)."""
    if not isinstance(metric, Metric):
        raise ConfigError(f"metrics.serialize: expected a flow.metrics.* instance, received {metric!r}")
    return {"class_name": type(metric).__name__, "config": metric.get_config()}


def deserialize(config, custom_objects=None):
    """The metric of a ``serialize`` output; ``custom_objects``: your own Metric classes by name."""
    table = {**{c.__name__: c for c in _CLASSES}, **(custom_objects or {})}
    if not isinstance(config, dict) or config.get("class_name") not in table:
        raise ConfigError(f"metrics.deserialize: expected {{'class_name': one of {sorted(table)}, 'config': "
                          f"{{...}}}}, received {config!r}")
    return table[config["class_name"]].from_config(dict(config.get("config", {})))


_IOU = ("its state is a confusion matrix of every class pair, which flowlayers does not count; TruePositives, "
        "FalsePositives and FalseNegatives with thresholds (or Precision/Recall with class_id) give "
        "IoU = tp / (tp + fp + fn) per class")
_BATCHWISE = ("Keras averages it over batches, so its value depends on how the data is batched and split over "
              "devices; compute it with numpy on model.predict(x)")
_MISSING = {
    **{name: _IOU for name in ("IoU", "BinaryIoU", "MeanIoU", "OneHotIoU", "OneHotMeanIoU")},
    **{name: _BATCHWISE for name in ("PearsonCorrelation", "ConcordanceCorrelation", "pearson_correlation",
                                     "concordance_correlation")},
}


def _refuse(name):
    raise ConfigError(f"flow.metrics.{name}: Keras 3's keras.metrics.{name} is not in flowlayers; {_MISSING[name]}")


def __getattr__(name):
    """A Keras metric name flowlayers lacks: a ConfigError saying what to use instead."""
    if name in _MISSING:
        _refuse(name)
    raise AttributeError(f"module 'flowlayers.metrics' has no attribute {name!r}")
