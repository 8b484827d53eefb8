"""The Loss base: ``loss(y_true, y_pred, sample_weight=None)`` is Keras 3's reduced scalar on numbers and numpy
arrays; on Blobs it builds the per-example loss that ``fit`` averages over the batch (in a traced custom step,
Keras' scalar: the mean over the batch).

A loss is computed in float32 from 16-bit predictions (a ``mixed_bfloat16`` model's), as Keras computes it.
"""
import numpy as np

from .. import dtypes, mixed_precision, ops
from ..errors import ConfigError
from ..framework import naming, step_trace
from ..ops import elementwise as ew, reduce
from ..ops.dispatch import dtype_of, symbolic

REDUCTIONS = ("sum_over_batch_size", "sum", "mean", "mean_with_sample_weight", "none", None)
# what a model's step minimises: the mean of the per-example values (Keras' default)
IN_A_STEP = ("sum_over_batch_size", "mean")


def check_reduction(reduction, what):
    if reduction not in REDUCTIONS:
        raise ConfigError(f"{what}: reduction expected one of {list(REDUCTIONS)}, received {reduction!r}")
    return reduction


def check_dtype(dtype, what):
    if dtype is not None:
        raise ConfigError(f"{what}: dtype expected None (a loss computes in its predictions' dtype, float32 for "
                          f"16-bit ones), received {dtype!r}")


class Loss:
    """Keras 3's ``Loss(name=None, reduction="sum_over_batch_size", dtype=None)``.  A subclass computes the
    per-example values in ``call(y_true, y_pred)``; or names a function of them in ``fn`` with its arguments in
    ``fn_kwargs()``."""

    fn = None

    def __init__(self, name=None, reduction="sum_over_batch_size", dtype=None):
        self.name = name or naming.snake_case(type(self).__name__)
        self.reduction = check_reduction(reduction, f"loss {self.name!r}")
        check_dtype(dtype, f"loss {self.name!r}")

    def fn_kwargs(self):
        return {}

    def label_spec(self, y_pred):
        """(shape, dtype) of the label placeholder for predictions ``y_pred`` (float32 for 16-bit ones)."""
        return y_pred.shape, loss_dtype(y_pred.dtype)

    def __call__(self, y_true, y_pred, sample_weight=None):
        if not symbolic(y_true, y_pred, sample_weight):
            values = self.host_values(y_true, y_pred)
            return reduce_weighted(values, sample_weight, self.reduction)
        self.check_in_a_step()
        per_example = self.per_example(y_true, y_pred)
        if sample_weight is not None:
            per_example, weight = same_rank(per_example, ops.cast(sample_weight, per_example.dtype))
            per_example = ops.multiply(per_example, weight)
        trace = step_trace.current()
        if trace is None:
            return per_example
        entries = reduce.reduce_mean(per_example, axis=list(range(1, per_example.ndim))) if per_example.ndim > 1 \
            else per_example
        loss = reduce.reduce_mean(entries, axis=0) if entries.ndim else entries
        trace.mean_of(entries, loss)
        return loss

    def check_in_a_step(self):
        """A model's step minimises the batch mean: another reduction is refused by name, not ignored."""
        if self.reduction not in IN_A_STEP:
            raise ConfigError(f"loss {self.name!r}: in a model's step, reduction expected one of {list(IN_A_STEP)} "
                              f"(the mean over the batch; weigh examples with sample_weight), received "
                              f"{self.reduction!r}; other reductions apply where the loss is called on arrays")

    def per_example(self, y_true, y_pred):
        """The loss of each example (of each entry, for a per-token loss)."""
        return self.call(y_true, in_loss_dtype(y_pred))

    def host_values(self, y_true, y_pred):
        y_pred = np.asarray(y_pred)
        if not np.issubdtype(y_pred.dtype, np.floating):
            y_pred = y_pred.astype(np.float32)
        return np.asarray(self.fn(y_true, y_pred, **self.fn_kwargs()) if self.fn else self.call(y_true, y_pred))

    def call(self, y_true, y_pred):
        if self.fn is None:
            raise NotImplementedError(f"{type(self).__name__}.call(y_true, y_pred)")
        return self.fn(y_true, y_pred, **self.fn_kwargs())

    def get_config(self):
        return {"name": self.name, "reduction": self.reduction, **self.fn_kwargs()}

    @classmethod
    def from_config(cls, config):
        return cls(**config)


def loss_dtype(dtype):
    """The dtype a loss (or metric) computes in for predictions of ``dtype``: float32 for 16-bit floats (Keras'
    losses take ``floatx``), the dtype itself otherwise."""
    return dtypes.float32 if mixed_precision.half(dtype) else dtype


def in_loss_dtype(y_pred):
    return y_pred if loss_dtype(y_pred.dtype) == y_pred.dtype else ew.cast(y_pred, loss_dtype(y_pred.dtype))


def same_rank(x1, x2, expand_rank_1=True):
    """Keras' ``squeeze_or_expand_to_same_rank``: where the ranks differ by one and the longer ends in 1, that axis
    is dropped (or, with ``expand_rank_1``, one added to a rank-1 other)."""
    r1, r2 = ops.ndim(x1), ops.ndim(x2)
    if r1 == r2 + 1 and ops.shape(x1)[-1] == 1:
        if r2 == 1 and expand_rank_1:
            x2 = ops.expand_dims(x2, -1)
        else:
            x1 = ops.squeeze(x1, -1)
    if r2 == r1 + 1 and ops.shape(x2)[-1] == 1:
        if r1 == 1 and expand_rank_1:
            x1 = ops.expand_dims(x1, -1)
        else:
            x2 = ops.squeeze(x2, -1)
    return x1, x2


def pair(y_true, y_pred):
    """``y_pred`` as a float tensor (float32 from ints) and ``y_true`` in its dtype, at the same rank (the first
    lines of Keras' loss functions)."""
    y_pred = y_pred if symbolic(y_pred) else np.asarray(y_pred)
    if not dtype_of(y_pred).is_floating:
        y_pred = ops.cast(y_pred, dtypes.float32)
    return same_rank(ops.cast(y_true, dtype_of(y_pred)), y_pred)


def reduce_weighted(values, sample_weight, reduction):
    """Keras' ``reduce_weighted_values`` on host arrays: weigh, then reduce as ``reduction`` says."""
    values = np.asarray(values)
    if sample_weight is not None:
        sample_weight = np.asarray(sample_weight).astype(values.dtype)
        values, sample_weight = same_rank(values, sample_weight)
        values = values * sample_weight
    if reduction in (None, "none") or values.shape in ((), (0,)):
        return values
    total = np.sum(values)
    if reduction == "sum":
        return total
    divisor = np.sum(sample_weight) if reduction == "mean_with_sample_weight" and sample_weight is not None \
        else values.size
    return (total / divisor if divisor else np.zeros((), values.dtype)).astype(values.dtype)
