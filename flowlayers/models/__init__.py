from .model import Model
from .saving import load_model, save_model
from .sequential import Sequential

__all__ = ["Model", "Sequential", "load_model", "save_model"]
