"""Keras 3's ``keras.datasets``, which flowlayers does not have: each of its names is refused by name, saying what to use
instead (``missing.py``)."""
from . import missing
from .errors import ConfigError


def __getattr__(name):
    return missing.refuse("datasets", name, ConfigError, globals())
