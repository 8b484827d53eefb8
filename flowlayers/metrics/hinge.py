"""Hinge metrics: Keras 3's classes averaging the hinge losses' functions (which are ``flow.losses``' own, as
``keras.metrics.hinge is keras.losses.hinge``).

As in Keras, ``hinge`` and ``squared_hinge`` read labels that are all 0 or 1 as -1/1, testing the labels of each
computation: a batch in Keras, here the batch in the consistent view and each replica's part of it in the
mirrored view.  Labels given as -1/1, or as 0/1, read the same either way; only labels mixing 0 and 1 with other
values can be read differently on a split batch.
"""
from ..losses import categorical_hinge, hinge, squared_hinge
from .base import Wrapped


class Hinge(Wrapped):
    fn = staticmethod(hinge)
    _direction = "down"

    def __init__(self, name="hinge", dtype=None):
        super().__init__(name, dtype)


class SquaredHinge(Wrapped):
    fn = staticmethod(squared_hinge)
    _direction = "down"

    def __init__(self, name="squared_hinge", dtype=None):
        super().__init__(name, dtype)


class CategoricalHinge(Wrapped):
    fn = staticmethod(categorical_hinge)
    _direction = "down"

    def __init__(self, name="categorical_hinge", dtype=None):
        super().__init__(name, dtype)
