"""Keras 3's ``keras.saving``: whole models and weights in Keras' files, and the registry of your own classes that
loading looks names up in.  Other Keras names are refused by name."""
from . import missing
from .errors import ConfigError
from .models import load_model, save_model
from .registry import (CustomObjectScope, custom_object_scope, get_custom_objects, get_registered_name,
                       get_registered_object, register_keras_serializable)

__all__ = ["CustomObjectScope", "custom_object_scope", "get_custom_objects", "get_registered_name",
           "get_registered_object", "load_model", "load_weights", "register_keras_serializable", "save_model",
           "save_weights"]


def save_weights(model, filepath, overwrite=True, **kwargs):
    """Keras' function form of ``model.save_weights``."""
    model.save_weights(filepath, overwrite=overwrite, **kwargs)


def load_weights(model, filepath, skip_mismatch=False, **kwargs):
    """Keras' function form of ``model.load_weights``."""
    if skip_mismatch:
        raise ConfigError(f"flow.saving.load_weights({filepath!r}): skip_mismatch=True is not supported; every "
                          f"weight must match (a mismatch is refused by name, nothing loaded)")
    model.load_weights(filepath, **kwargs)


def __getattr__(name):
    return missing.refuse("saving", name, ConfigError, __all__)
