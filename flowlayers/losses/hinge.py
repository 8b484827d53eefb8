"""Hinge losses: Keras 3's functions (on numpy arrays and on Blobs alike) and their classes.

As in Keras, ``hinge`` and ``squared_hinge`` read labels that are all 0 or 1 as -1/1; the test is over the labels
the call is given: in a model's step, the whole batch in the consistent view, each replica's part in the mirrored
view (as Keras' MirroredStrategy decides per replica).  Labels given as -1/1 are read alike everywhere.
"""
from .. import ops
from .base import Loss, pair


def _as_signs(y_true):
    """Keras' ``convert_binary_labels_to_hinge``: labels all 0 or 1 become -1/1, others stay."""
    binary = ops.all(ops.logical_or(ops.equal(y_true, 0.0), ops.equal(y_true, 1.0)))
    return ops.where(binary, ops.subtract(ops.multiply(y_true, 2.0), 1.0), y_true)


def hinge(y_true, y_pred):
    y_true, y_pred = pair(y_true, y_pred)
    return ops.mean(ops.maximum(ops.subtract(1.0, ops.multiply(_as_signs(y_true), y_pred)), 0.0), axis=-1)


def squared_hinge(y_true, y_pred):
    y_true, y_pred = pair(y_true, y_pred)
    margin = ops.maximum(ops.subtract(1.0, ops.multiply(_as_signs(y_true), y_pred)), 0.0)
    return ops.mean(ops.square(margin), axis=-1)


def categorical_hinge(y_true, y_pred):
    """``max(0, max((1 - y) p) - sum(y p) + 1)`` over the class axis."""
    y_true, y_pred = pair(y_true, y_pred)
    positive = ops.sum(ops.multiply(y_true, y_pred), axis=-1)
    negative = ops.max(ops.multiply(ops.subtract(1.0, y_true), y_pred), axis=-1)
    return ops.maximum(ops.add(ops.subtract(negative, positive), 1.0), 0.0)


class Hinge(Loss):
    fn = staticmethod(hinge)

    def __init__(self, reduction="sum_over_batch_size", name="hinge", dtype=None):
        super().__init__(name, reduction, dtype)


class SquaredHinge(Loss):
    fn = staticmethod(squared_hinge)

    def __init__(self, reduction="sum_over_batch_size", name="squared_hinge", dtype=None):
        super().__init__(name, reduction, dtype)


class CategoricalHinge(Loss):
    fn = staticmethod(categorical_hinge)

    def __init__(self, reduction="sum_over_batch_size", name="categorical_hinge", dtype=None):
        super().__init__(name, reduction, dtype)
