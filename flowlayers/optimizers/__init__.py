"""Optimizers as specs whose update rules are written once, against a tiny array namespace.

The backend supplies ``xp`` (``contract.ArrayNamespace``: ``sqrt``, ``abs``, ``sign``, ``maximum``, ...,
``assign``); the same rule therefore runs in every view and device count, so the view switch cannot change the
arithmetic.  Keras 3 names and defaults; ``learning_rate`` may be a ``schedules`` schedule.  Keras' optimizers
not here are refused by name (``missing``).
"""
from .. import missing
from ..errors import ConfigError
from . import schedules
from .adadelta import Adadelta
from .adagrad import Adagrad
from .adamax import Adamax
from .base import Optimizer
from .ftrl import Ftrl
from .lion import Lion
from .loss_scale import LossScaleOptimizer
from .nadam import Nadam
from .rules import SGD, Adam, AdamW, RMSprop

__all__ = ["Optimizer", "SGD", "Adam", "AdamW", "RMSprop", "Adagrad", "Adamax", "Nadam", "Adadelta", "Lion",
           "Ftrl", "LossScaleOptimizer", "schedules", "get", "serialize", "deserialize"]

_CLASSES = (SGD, Adam, AdamW, RMSprop, Adagrad, Adamax, Nadam, Adadelta, Lion, Ftrl)
_BY_NAME = {cls.__name__.lower(): cls for cls in _CLASSES}


def get(identifier):
    """An Optimizer from an instance, a Keras name (``'adam'``, any case) or ``serialize``'s dict."""
    if isinstance(identifier, Optimizer):
        return identifier
    if isinstance(identifier, dict):
        return deserialize(identifier)
    if isinstance(identifier, str) and identifier.lower() in _BY_NAME:
        return _BY_NAME[identifier.lower()]()
    raise ConfigError(f"optimizer: expected a flow.optimizers.* instance or one of {sorted(_BY_NAME)}, received "
                      f"{identifier!r}")


def serialize(optimizer):
    """``optimizer`` as Keras 3 writes one: ``{"module", "class_name", "config", "registered_name"}``, a schedule
    as learning rate written as ``schedules.serialize`` writes it."""
    if type(optimizer) not in _CLASSES:
        raise ConfigError(f"optimizers.serialize: expected one of {sorted(c.__name__ for c in _CLASSES)}, received "
                          f"{optimizer!r}")
    config = optimizer.get_config()
    if callable(config["learning_rate"]):
        raise ConfigError(f"optimizers.serialize: optimizer {optimizer.name!r} has a learning_rate callable, which "
                          f"is code; expected a number or a flow.optimizers.schedules schedule")
    return {"module": "keras.optimizers", "class_name": type(optimizer).__name__, "config": config,
            "registered_name": None}


def deserialize(config, custom_objects=None):
    """An optimizer from ``serialize``'s dict: Keras' class names, others from ``custom_objects``."""
    custom_objects = custom_objects or {}
    if not isinstance(config, dict) or not isinstance(config.get("class_name"), str):
        raise ConfigError(f"optimizers.deserialize: expected a {{'class_name', 'config'}} dict, received {config!r}")
    name, arguments = config["class_name"], dict(config.get("config") or {})
    cls = custom_objects.get(name) or {c.__name__: c for c in _CLASSES}.get(name)
    if cls is None:
        raise ConfigError(f"optimizers.deserialize: expected one of {sorted(c.__name__ for c in _CLASSES)} or a "
                          f"class in custom_objects, received class_name {name!r}")
    return cls.from_config(arguments, custom_objects)


def __getattr__(name):
    return missing.refuse("optimizers", name, ConfigError, globals())
