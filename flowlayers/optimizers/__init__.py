"""Optimizers as specs whose update rules are written once, against a tiny array namespace.

The backend supplies ``xp`` (``sqrt``, ``assign``); the same rule therefore
runs in every view and device count, so the view switch cannot change the
arithmetic.  Keras 3 names and defaults.
"""
from ..errors import ConfigError
from .base import Optimizer
from .loss_scale import LossScaleOptimizer
from .rules import SGD, Adam, AdamW, RMSprop

__all__ = ["Optimizer", "SGD", "Adam", "AdamW", "RMSprop", "LossScaleOptimizer", "get"]

_BY_NAME = {"sgd": SGD, "adam": Adam, "adamw": AdamW, "rmsprop": RMSprop}


def get(identifier):
    """An Optimizer from an instance or a Keras name ('sgd', 'adam', 'adamw', 'rmsprop')."""
    if isinstance(identifier, Optimizer):
        return identifier
    if isinstance(identifier, str) and identifier.lower() in _BY_NAME:
        return _BY_NAME[identifier.lower()]()
    raise ConfigError(f"optimizer: expected a flow.optimizers.* instance or one of {sorted(_BY_NAME)}, received "
                      f"{identifier!r}")
