"""Keras' models: ``Model`` (functional or subclassed), ``Sequential``, saving and loading; a Keras name flowlayers
lacks is refused by name, saying what to use instead."""
from .. import missing
from ..errors import ConfigError
from .model import Model
from .loading import load_model
from .saving import save_model
from .sequential import Sequential

__all__ = ["Model", "Sequential", "load_model", "save_model"]


def __getattr__(name):
    """A Keras ``models`` name flowlayers lacks: a ConfigError naming it and what to use instead."""
    return missing.refuse("models", name, ConfigError, globals())
