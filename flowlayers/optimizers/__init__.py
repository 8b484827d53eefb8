"""Optimizers as specs whose update rules are written once, against a tiny array namespace.

The backend supplies ``xp`` (``sqrt``, ``assign``); the same rule therefore
runs in every view and device count, so the view switch cannot change the
arithmetic.  Keras 3 names and defaults.
"""
from .base import Optimizer, get
from .rules import SGD, Adam, AdamW, RMSprop

__all__ = ["Optimizer", "SGD", "Adam", "AdamW", "RMSprop", "get"]
