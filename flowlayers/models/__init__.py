from .model import Model
from .sequential import Sequential

__all__ = ["Model", "Sequential"]
