"""Accuracy metrics: Keras 3's functions (one value per example or entry, on host arrays and on Blobs alike) and
the classes that average them."""
from .. import dtypes
from . import arrays as A
from .base import Wrapped


def _matches(condition):
    return A.cast(condition, dtypes.float32)


def accuracy(y_true, y_pred):
    """1 where ``y_true`` equals ``y_pred``."""
    y_true, y_pred = A.same_rank(A.cast(y_true, A.dtype_of(y_pred)), y_pred)
    return _matches(A.equal(y_true, y_pred))


def binary_accuracy(y_true, y_pred, threshold=0.5):
    """1 where ``y_pred > threshold`` agrees with ``y_true``."""
    y_true, y_pred = A.same_rank(y_true, y_pred)
    return _matches(A.equal(y_true, A.cast(A.greater(y_pred, threshold), A.dtype_of(y_true))))


def categorical_accuracy(y_true, y_pred):
    """1 where the largest prediction is at the one-hot label."""
    return _matches(A.equal(A.argmax(y_true), A.argmax(y_pred)))


def _sparse_ids(y_true, y_pred):
    """Class ids shaped as ``y_pred`` without its class axis (labels of shape ``(n, 1)`` lose that axis)."""
    if len(A.shape(y_true)) == len(A.shape(y_pred)) and A.shape(y_true)[-1] == 1:
        y_true = A.squeeze_last(y_true)
    return y_true


def sparse_categorical_accuracy(y_true, y_pred):
    """1 where the largest prediction is at the class id."""
    y_true = _sparse_ids(y_true, y_pred)
    return _matches(A.equal(A.cast(A.argmax(y_pred), dtypes.float32), A.cast(y_true, dtypes.float32)))


def in_top_k(targets, predictions, k):
    """1 where the prediction at class ``targets`` is among the ``k`` largest: fewer than ``k`` predictions exceed
    it (equal ones straddling the k-th place all count as in, as Keras' ``in_top_k`` has it)."""
    at_target = A.total(predictions * A.one_hot(targets, A.shape(predictions)[-1], predictions), keepdims=True)
    return _matches(A.greater(float(k), A.squeeze_last(A.count_above(predictions, at_target))))


def top_k_categorical_accuracy(y_true, y_pred, k=5):
    """1 where the one-hot label's class is among the ``k`` largest predictions."""
    return in_top_k(A.argmax(y_true), y_pred, k)


def sparse_top_k_categorical_accuracy(y_true, y_pred, k=5, from_sorted_ids=False):
    """1 where the class id is among the ``k`` largest predictions; ``from_sorted_ids``: ``y_pred`` holds class ids
    sorted best first, and the id is among its first ``k``."""
    y_true = _sparse_ids(y_true, y_pred)
    if from_sorted_ids:
        hits = _matches(A.equal(y_pred, A.expand_last(A.cast(y_true, A.dtype_of(y_pred)))))
        return A.largest(hits * A.leading(y_pred, k))
    return in_top_k(y_true, y_pred, k)


class Accuracy(Wrapped):
    """How often predictions equal labels."""
    _direction = "up"
    fn = staticmethod(accuracy)

    def __init__(self, name="accuracy", dtype=None):
        super().__init__(name, dtype)


class BinaryAccuracy(Wrapped):
    """How often ``y_pred > threshold`` agrees with the binary labels."""
    _direction = "up"
    fn = staticmethod(binary_accuracy)

    def __init__(self, name="binary_accuracy", dtype=None, threshold=0.5):
        super().__init__(name, dtype, threshold=threshold)
        self.threshold = threshold


class CategoricalAccuracy(Wrapped):
    """How often the largest prediction is at the one-hot label."""
    _direction = "up"
    fn = staticmethod(categorical_accuracy)

    def __init__(self, name="categorical_accuracy", dtype=None):
        super().__init__(name, dtype)


class SparseCategoricalAccuracy(Wrapped):
    """How often the largest prediction is at the integer label."""
    _direction = "up"
    fn = staticmethod(sparse_categorical_accuracy)

    def __init__(self, name="sparse_categorical_accuracy", dtype=None):
        super().__init__(name, dtype)


class TopKCategoricalAccuracy(Wrapped):
    """How often the one-hot label's class is among the ``k`` largest predictions."""
    _direction = "up"
    fn = staticmethod(top_k_categorical_accuracy)

    def __init__(self, k=5, name="top_k_categorical_accuracy", dtype=None):
        super().__init__(name, dtype, k=k)
        self.k = k


class SparseTopKCategoricalAccuracy(Wrapped):
    """How often the integer label is among the ``k`` largest predictions (``from_sorted_ids``: among the first
    ``k`` of predictions that are class ids, best first)."""
    _direction = "up"
    fn = staticmethod(sparse_top_k_categorical_accuracy)

    def __init__(self, k=5, name="sparse_top_k_categorical_accuracy", dtype=None, from_sorted_ids=False):
        super().__init__(name, dtype, k=k, from_sorted_ids=from_sorted_ids)
        self.k, self.from_sorted_ids = k, from_sorted_ids
