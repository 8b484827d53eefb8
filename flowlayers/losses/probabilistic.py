"""KL divergence and Poisson: Keras 3's functions (on numpy arrays and on Blobs alike) and their classes."""
from .. import ops
from .base import Loss, pair

EPSILON = 1e-7     # Keras' backend.epsilon()


def kl_divergence(y_true, y_pred):
    """``sum(y log(y / p))`` over the last axis, both clipped into [EPSILON, 1]."""
    y_true, y_pred = pair(y_true, y_pred)
    y_true, y_pred = ops.clip(y_true, EPSILON, 1.0), ops.clip(y_pred, EPSILON, 1.0)
    return ops.sum(ops.multiply(y_true, ops.log(ops.divide(y_true, y_pred))), axis=-1)


def poisson(y_true, y_pred):
    """``mean(p - y log(p + EPSILON))`` over the last axis."""
    y_true, y_pred = pair(y_true, y_pred)
    return ops.mean(ops.subtract(y_pred, ops.multiply(y_true, ops.log(ops.add(y_pred, EPSILON)))), axis=-1)


class KLDivergence(Loss):
    fn = staticmethod(kl_divergence)

    def __init__(self, reduction="sum_over_batch_size", name="kl_divergence", dtype=None):
        super().__init__(name, reduction, dtype)


class Poisson(Loss):
    fn = staticmethod(poisson)

    def __init__(self, reduction="sum_over_batch_size", name="poisson", dtype=None):
        super().__init__(name, reduction, dtype)
