"""Keras 3's ``keras.utils`` names that flowlayers has: drawing a model (``plot_model``, ``model_to_dot``) and
the DOT text behind it (``model_to_dot_source``, flowlayers', needing no pydot)."""
from .model_plot import model_to_dot, model_to_dot_source, plot_model

__all__ = ["model_to_dot", "model_to_dot_source", "plot_model"]
