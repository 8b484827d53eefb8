"""Keras 3's losses: classes, the functions they average, and ``get`` / ``serialize`` / ``deserialize``.

    model.compile(loss=flow.losses.SparseCategoricalCrossentropy(from_logits=True))
    model.compile(loss="huber")                 # Keras' names and aliases: "mse", "mae", "mape", "msle", "kld", "bce"
    flow.losses.huber(y_true, y_pred)           # per example, on numpy arrays or Blobs
    flow.losses.Huber()(y_true, y_pred)         # on arrays: reduced as ``reduction`` says, as in Keras

In a model's step a loss gives one value per example (per entry, for a per-token loss) and ``fit`` minimises their
mean.  A Keras loss flowlayers does not have is refused by name, saying what to use instead.
"""
import inspect

from .. import missing
from ..errors import ConfigError
from .base import Loss, in_loss_dtype, loss_dtype  # noqa: F401
from .crossentropy import (BinaryCrossentropy, BinaryFocalCrossentropy, CategoricalCrossentropy,  # noqa: F401
                           CategoricalFocalCrossentropy, SparseCategoricalCrossentropy, binary_crossentropy,
                           binary_focal_crossentropy, categorical_crossentropy, categorical_focal_crossentropy,
                           sparse_categorical_crossentropy)
from .hinge import CategoricalHinge, Hinge, SquaredHinge, categorical_hinge, hinge, squared_hinge  # noqa: F401
from .probabilistic import KLDivergence, Poisson, kl_divergence, poisson  # noqa: F401
from .regression import (CosineSimilarity, Huber, LogCosh, MeanAbsoluteError,  # noqa: F401
                         MeanAbsolutePercentageError, MeanSquaredError, MeanSquaredLogarithmicError,
                         cosine_similarity, huber, log_cosh, mean_absolute_error, mean_absolute_percentage_error,
                         mean_squared_error, mean_squared_logarithmic_error)


class LossFunctionWrapper(Loss):
    """A loss of your own function ``fn(y_true, y_pred, **kwargs)`` giving per-example values, as Keras wraps a
    function given to ``compile``."""

    def __init__(self, fn, reduction="sum_over_batch_size", name=None, dtype=None, **kwargs):
        if not callable(fn):
            raise ConfigError(f"LossFunctionWrapper: fn expected a function of (y_true, y_pred), received {fn!r}")
        self.fn, self.kwargs = fn, kwargs
        super().__init__(name or getattr(fn, "__name__", None), reduction, dtype)

    def fn_kwargs(self):
        return dict(self.kwargs)


_CLASSES = {c.__name__: c for c in (
    BinaryCrossentropy, BinaryFocalCrossentropy, CategoricalCrossentropy, CategoricalFocalCrossentropy,
    SparseCategoricalCrossentropy, CategoricalHinge, Hinge, SquaredHinge, KLDivergence, Poisson, CosineSimilarity,
    Huber, LogCosh, MeanAbsoluteError, MeanAbsolutePercentageError, MeanSquaredError, MeanSquaredLogarithmicError)}

# each function's class: compile takes a function as it, with that function's defaults
_CLASS_OF_FUNCTION = {
    binary_crossentropy: BinaryCrossentropy, binary_focal_crossentropy: BinaryFocalCrossentropy,
    categorical_crossentropy: CategoricalCrossentropy, categorical_focal_crossentropy: CategoricalFocalCrossentropy,
    sparse_categorical_crossentropy: SparseCategoricalCrossentropy, categorical_hinge: CategoricalHinge,
    hinge: Hinge, squared_hinge: SquaredHinge, kl_divergence: KLDivergence, poisson: Poisson,
    cosine_similarity: CosineSimilarity, huber: Huber, log_cosh: LogCosh, mean_absolute_error: MeanAbsoluteError,
    mean_absolute_percentage_error: MeanAbsolutePercentageError, mean_squared_error: MeanSquaredError,
    mean_squared_logarithmic_error: MeanSquaredLogarithmicError}

# Keras' names for a loss (keras.losses.get): a class's or a function's name, and the short aliases
_BY_NAME = {**_CLASSES, **{f.__name__: f for f in _CLASS_OF_FUNCTION},
            **{alias: f for f, aliases in ((binary_crossentropy, ("bce", "BCE")), (kl_divergence, ("kld", "KLD")),
                                           (mean_absolute_error, ("mae", "MAE")), (mean_squared_error, ("mse", "MSE")),
                                           (mean_absolute_percentage_error, ("mape", "MAPE")),
                                           (mean_squared_logarithmic_error, ("msle", "MSLE")))
               for alias in aliases}}


def get(identifier):
    """A Loss from an instance, a Keras name or alias (``"huber"``, ``"Huber"``, ``"mse"``), a loss function (one
    of these, or your own of ``(y_true, y_pred)``), a class, or what ``serialize`` wrote."""
    if isinstance(identifier, dict):
        return deserialize(identifier)
    obj = _BY_NAME.get(identifier) if isinstance(identifier, str) else identifier
    if isinstance(obj, str) or obj is None:
        if identifier in missing.KERAS_NAMES["losses"]:
            missing.refuse("losses", identifier, ConfigError, _BY_NAME)
        raise ConfigError(f"loss: expected a flow.losses.* instance, a function of (y_true, y_pred) or one of "
                          f"{sorted(_BY_NAME)}, received {identifier!r}")
    if inspect.isclass(obj):
        if not issubclass(obj, Loss):
            raise ConfigError(f"loss: expected a flow.losses.Loss class, received {obj!r}")
        obj = obj()
    elif not isinstance(obj, Loss):
        if not callable(obj):
            raise ConfigError(f"loss: expected a flow.losses.* instance, a function of (y_true, y_pred) or one of "
                              f"{sorted(_BY_NAME)}, received {identifier!r}")
        obj = _CLASS_OF_FUNCTION[obj]() if obj in _CLASS_OF_FUNCTION else LossFunctionWrapper(obj)
    obj.check_in_a_step()
    return obj


def serialize(loss):
    """``{"class_name": ..., "config": ...}`` of a Loss; a loss function's name."""
    if isinstance(loss, Loss) and not isinstance(loss, LossFunctionWrapper):
        return {"class_name": type(loss).__name__, "config": loss.get_config()}
    if loss in _CLASS_OF_FUNCTION:
        return loss.__name__
    raise ConfigError(f"losses.serialize: expected a flow.losses.* instance or function, received {loss!r}")


def deserialize(config, custom_objects=None):
    """The loss (or loss function) of a ``serialize`` output; ``custom_objects``: your own by name."""
    table = {**_BY_NAME, **(custom_objects or {})}
    if isinstance(config, str) and config in table:
        return table[config]
    if not isinstance(config, dict) or config.get("class_name") not in table:
        raise ConfigError(f"losses.deserialize: expected a loss name or {{'class_name': one of {sorted(_CLASSES)}, "
                          f"'config': {{...}}}}, received {config!r}")
    cls = table[config["class_name"]]
    if not (inspect.isclass(cls) and issubclass(cls, Loss)):
        raise ConfigError(f"losses.deserialize: expected class_name naming a Loss class, received {cls!r}")
    try:
        return cls.from_config(dict(config.get("config", {})))
    except TypeError as e:
        raise ConfigError(f"losses.deserialize: expected the arguments of {config['class_name']}, received "
                          f"{config.get('config')!r} ({e})") from None


def __getattr__(name):
    """A Keras loss flowlayers lacks: a ConfigError naming it and what to use instead."""
    return missing.refuse("losses", name, ConfigError, globals())
