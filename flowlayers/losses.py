"""Losses as specs: ``loss(y_true, y_pred)`` builds the per-example loss Blob; ``fit`` minimises its mean.

    model.compile(loss=flow.losses.SparseCategoricalCrossentropy(from_logits=True))
    model.compile(loss="sparse_categorical_crossentropy")

A loss is computed in float32 from 16-bit predictions (a ``mixed_bfloat16`` model's), as Keras computes it.
"""
from . import dtypes, mixed_precision
from .errors import ConfigError
from .framework import naming, step_trace
from .ops import elementwise as ew, nn, reduce


class Loss:
    def __init__(self, from_logits=False, name=None):
        self.from_logits = from_logits
        self.name = name or naming.snake_case(type(self).__name__)

    def label_spec(self, y_pred):
        """(shape, dtype) of the label placeholder for predictions ``y_pred`` (float32 for 16-bit ones)."""
        return y_pred.shape, loss_dtype(y_pred.dtype)

    def __call__(self, y_true, y_pred):
        """The per-example loss of ``y_pred`` (16-bit predictions cast to float32 first) against ``y_true``; in a
        traced custom step, Keras' scalar: its mean over the batch (the per-example values are summed where it is
        minimised or averaged, exact in every view)."""
        per_example = self.per_example(y_true, y_pred)
        trace = step_trace.current()
        if trace is None:
            return per_example
        entries = reduce.reduce_mean(per_example, axis=list(range(1, per_example.ndim))) if per_example.ndim > 1 \
            else per_example
        loss = reduce.reduce_mean(entries, axis=0) if entries.ndim else entries
        trace.mean_of(entries, loss)
        return loss

    def per_example(self, y_true, y_pred):
        """The loss of each example (of each entry, for a per-token loss)."""
        return self.call(y_true, in_loss_dtype(y_pred))

    def call(self, y_true, y_pred):
        raise NotImplementedError

    def get_config(self):
        return {"name": self.name, "from_logits": self.from_logits}


def loss_dtype(dtype):
    """The dtype a loss (or metric) computes in for predictions of ``dtype``: float32 for 16-bit floats (Keras'
    losses take ``floatx``), the dtype itself otherwise."""
    return dtypes.float32 if mixed_precision.half(dtype) else dtype


def in_loss_dtype(y_pred):
    return y_pred if loss_dtype(y_pred.dtype) == y_pred.dtype else ew.cast(y_pred, loss_dtype(y_pred.dtype))


EPSILON = 1e-7     # Keras' backend.epsilon(): probabilities are clipped into [EPSILON, 1 - EPSILON]


def _clipped_log(p):
    return ew.log(ew.minimum(ew.maximum(p, EPSILON), 1.0 - EPSILON))


def _softmax_logits(y_pred):
    """The logits of a last-axis softmax that made ``y_pred``, or None.  Keras takes the cross-entropy from them
    (exact where a probability is below the clip), and so does flowlayers."""
    node = y_pred.node
    if node.op.name == "softmax" and node.attrs["axis"] == y_pred.ndim - 1:
        return node.inputs[0]
    return None


class SparseCategoricalCrossentropy(Loss):
    """Keras 3's: from probabilities, ``-log(q_y / sum(q))`` with ``q`` the clipped probabilities."""

    def label_spec(self, y_pred):
        return y_pred.shape[:-1], dtypes.int32

    def call(self, y_true, y_pred):
        logits = y_pred if self.from_logits else _softmax_logits(y_pred)
        if logits is None:
            logits = _clipped_log(y_pred)
        return nn.sparse_softmax_cross_entropy_with_logits(y_true, logits)


class CategoricalCrossentropy(Loss):
    """Keras 3's: from probabilities, normalised to sum to 1, then clipped: ``-sum(y * log(q))``."""

    def call(self, y_true, y_pred):
        logits = y_pred if self.from_logits else _softmax_logits(y_pred)
        if logits is not None:
            return nn.softmax_cross_entropy_with_logits(y_true, logits)
        q = y_pred / reduce.reduce_sum(y_pred, axis=-1, keepdims=True)
        return ew.negative(reduce.reduce_sum(y_true * _clipped_log(q), axis=-1))


class BinaryCrossentropy(Loss):
    def call(self, y_true, y_pred):
        sigmoid = y_pred.node.op.name == "sigmoid"     # Keras takes the logits of a sigmoid that made y_pred
        if self.from_logits or sigmoid:
            per = nn.sigmoid_cross_entropy_with_logits(y_true, y_pred.node.inputs[0] if sigmoid and not
                                                       self.from_logits else y_pred)
        else:
            p = ew.minimum(ew.maximum(y_pred, EPSILON), 1.0 - EPSILON)
            per = ew.negative(y_true * ew.log(p) + (1.0 - y_true) * ew.log(1.0 - p))
        return reduce.reduce_mean(per, axis=-1)


class MeanSquaredError(Loss):
    def call(self, y_true, y_pred):
        return reduce.reduce_mean(ew.square(y_pred - y_true), axis=-1)


class MeanAbsoluteError(Loss):
    def call(self, y_true, y_pred):
        return reduce.reduce_mean(ew.abs(y_pred - y_true), axis=-1)


_BY_NAME = {
    "sparse_categorical_crossentropy": SparseCategoricalCrossentropy,
    "categorical_crossentropy": CategoricalCrossentropy, "binary_crossentropy": BinaryCrossentropy,
    "mean_squared_error": MeanSquaredError, "mse": MeanSquaredError, "mean_absolute_error": MeanAbsoluteError,
    "mae": MeanAbsoluteError,
}


def get(identifier):
    if isinstance(identifier, Loss):
        return identifier
    if isinstance(identifier, str) and identifier in _BY_NAME:
        return _BY_NAME[identifier]()
    raise ConfigError(f"loss: expected a flow.losses.* instance or one of {sorted(_BY_NAME)}, received "
                      f"{identifier!r}")
