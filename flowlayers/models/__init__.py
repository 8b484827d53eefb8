from .model import Model
from .loading import load_model
from .saving import save_model
from .sequential import Sequential

__all__ = ["Model", "Sequential", "load_model", "save_model"]
