"""Keras 3's ``keras.utils`` names that flowlayers has: preparing arrays (``to_categorical``, ``normalize``,
``pad_sequences``), data made in Python (``PyDataset``), seeds, the registry of your own classes, and drawing a
model (``plot_model``, ``model_to_dot``; ``model_to_dot_source`` is flowlayers', needing no pydot).  Other Keras
names are refused by name."""
from .. import missing
from ..errors import ConfigError
from ..registry import (CustomObjectScope, custom_object_scope, get_custom_objects, get_registered_name,
                        get_registered_object, register_keras_serializable)
from .arrays import normalize, pad_sequences, to_categorical
from .data_tuples import pack_x_y_sample_weight, unpack_x_y_sample_weight
from .model_plot import model_to_dot, model_to_dot_source, plot_model
from .py_dataset import PyDataset, Sequence
from .seeds import set_random_seed

__all__ = ["CustomObjectScope", "PyDataset", "Sequence", "custom_object_scope", "get_custom_objects",
           "get_registered_name", "get_registered_object", "model_to_dot", "model_to_dot_source", "normalize",
           "pack_x_y_sample_weight", "pad_sequences", "plot_model", "register_keras_serializable",
           "set_random_seed", "to_categorical", "unpack_x_y_sample_weight"]


def __getattr__(name):
    """A Keras ``utils`` name flowlayers lacks: a ConfigError naming it and what to use instead."""
    return missing.refuse("utils", name, ConfigError, __all__)
