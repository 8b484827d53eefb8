"""Cross-entropies: Keras 3's functions (on numpy arrays and on Blobs alike) and the classes that average them.
Probabilities are clipped into [EPSILON, 1 - EPSILON] as Keras clips them; in a model, a softmax or sigmoid that
made the predictions gives its logits to the loss, as Keras takes them (exact where a probability is below the
clip)."""
from .. import dtypes, ops
from ..errors import ConfigError
from ..ops import elementwise as ew, nn, reduce
from ..ops.dispatch import dtype_of
from .base import Loss, pair

EPSILON = 1e-7     # Keras' backend.epsilon()


def _clipped(p):
    return ops.clip(p, EPSILON, 1.0 - EPSILON)


def _smooth_binary(y_true, label_smoothing):
    return y_true if not label_smoothing else ops.add(ops.multiply(y_true, 1.0 - label_smoothing),
                                                       0.5 * label_smoothing)


def _smooth_categorical(y_true, label_smoothing):
    if not label_smoothing:
        return y_true
    return ops.add(ops.multiply(y_true, 1.0 - label_smoothing), label_smoothing / ops.shape(y_true)[-1])


def _binary_values(y_true, y_pred, from_logits):
    """Keras' ``ops.binary_crossentropy``: elementwise, from logits as ``max(x, 0) - x y + log(1 + exp(-|x|))``."""
    if from_logits:
        return ops.add(ops.subtract(ops.maximum(y_pred, 0.0), ops.multiply(y_pred, y_true)),
                       ops.softplus(ops.negative(ops.abs(y_pred))))
    p = _clipped(y_pred)
    return ops.negative(ops.add(ops.multiply(y_true, ops.log(p)),
                                ops.multiply(ops.subtract(1.0, y_true), ops.log(ops.subtract(1.0, p)))))


def binary_crossentropy(y_true, y_pred, from_logits=False, label_smoothing=0.0, axis=-1):
    y_true, y_pred = pair(y_true, y_pred)
    y_true = _smooth_binary(y_true, label_smoothing)
    return ops.mean(_binary_values(y_true, y_pred, from_logits), axis=axis)


def _class_axis(axis, what):
    if axis != -1:
        raise ConfigError(f"{what}: axis expected -1 (the class axis last), received {axis!r}")


def categorical_crossentropy(y_true, y_pred, from_logits=False, label_smoothing=0.0, axis=-1):
    _class_axis(axis, "categorical_crossentropy")
    y_true, y_pred = pair(y_true, y_pred)
    y_true = _smooth_categorical(y_true, label_smoothing)
    if from_logits:
        return ops.negative(ops.sum(ops.multiply(y_true, ops.log_softmax(y_pred)), axis=-1))
    p = _clipped(ops.divide(y_pred, ops.sum(y_pred, axis=-1, keepdims=True)))
    return ops.negative(ops.sum(ops.multiply(y_true, ops.log(p)), axis=-1))


def _no_ignore_class(ignore_class, what):
    if ignore_class is not None:
        raise ConfigError(f"{what}: ignore_class expected None (labels to leave out are not supported), received "
                          f"{ignore_class!r}; give those examples sample_weight 0")


def sparse_categorical_crossentropy(y_true, y_pred, from_logits=False, ignore_class=None, axis=-1):
    """From probabilities, ``-log(q_y / sum(q))`` of the clipped probabilities ``q`` (Keras' form)."""
    _no_ignore_class(ignore_class, "sparse_categorical_crossentropy")
    _class_axis(axis, "sparse_categorical_crossentropy")
    y_pred = pair(y_pred, y_pred)[1]
    if ops.ndim(y_true) == ops.ndim(y_pred) and ops.shape(y_true)[-1] == 1:
        y_true = ops.squeeze(y_true, -1)
    logits = y_pred if from_logits else ops.log(_clipped(y_pred))
    hot = ops.one_hot(ops.cast(y_true, "int32"), ops.shape(y_pred)[-1], dtype=dtype_of(y_pred))
    return ops.negative(ops.sum(ops.multiply(hot, ops.log_softmax(logits)), axis=-1))


def binary_focal_crossentropy(y_true, y_pred, apply_class_balancing=False, alpha=0.25, gamma=2.0, from_logits=False,
                              label_smoothing=0.0, axis=-1):
    """The binary cross-entropy times ``(1 - p_t) ** gamma``; with ``apply_class_balancing``, times ``alpha`` for
    positives and ``1 - alpha`` for negatives."""
    y_true, y_pred = pair(y_true, y_pred)
    y_true = _smooth_binary(y_true, label_smoothing)
    if from_logits:
        y_pred = ops.sigmoid(y_pred)
    bce = _binary_values(y_true, y_pred, False)
    p_t = ops.add(ops.multiply(y_true, y_pred), ops.multiply(ops.subtract(1.0, y_true), ops.subtract(1.0, y_pred)))
    focal = ops.multiply(ops.power(ops.subtract(1.0, p_t), float(gamma)), bce)
    if apply_class_balancing:
        focal = ops.multiply(ops.add(ops.multiply(y_true, alpha), ops.multiply(ops.subtract(1.0, y_true),
                                                                              1.0 - alpha)), focal)
    return ops.mean(focal, axis=axis)


def categorical_focal_crossentropy(y_true, y_pred, alpha=0.25, gamma=2.0, from_logits=False, label_smoothing=0.0,
                                   axis=-1):
    """``-sum(alpha (1 - p) ** gamma y log p)`` over the class axis, ``p`` normalised and clipped."""
    y_true, y_pred = pair(y_true, y_pred)
    y_true = _smooth_categorical(y_true, label_smoothing)
    if from_logits:
        y_pred = ops.softmax(y_pred, axis=axis)
    p = _clipped(ops.divide(y_pred, ops.sum(y_pred, axis=axis, keepdims=True)))
    weight = ops.multiply(ops.power(ops.subtract(1.0, p), float(gamma)), alpha)
    return ops.sum(ops.multiply(weight, ops.negative(ops.multiply(y_true, ops.log(p)))), axis=axis)


def _softmax_logits(y_pred):
    """The logits of a last-axis softmax that made ``y_pred`` (a Blob), or None."""
    node = y_pred.node
    if node.op.name == "softmax" and node.attrs["axis"] == y_pred.ndim - 1:
        return node.inputs[0]
    return None


def _check_probability_args(what, label_smoothing):
    if not 0.0 <= label_smoothing <= 1.0:
        raise ConfigError(f"{what}: label_smoothing expected a value in [0, 1], received {label_smoothing!r}")


class SparseCategoricalCrossentropy(Loss):
    fn = staticmethod(sparse_categorical_crossentropy)

    def __init__(self, from_logits=False, ignore_class=None, reduction="sum_over_batch_size", axis=-1,
                 name="sparse_categorical_crossentropy", dtype=None):
        _no_ignore_class(ignore_class, "SparseCategoricalCrossentropy")
        _class_axis(axis, "SparseCategoricalCrossentropy")
        super().__init__(name, reduction, dtype)
        self.from_logits = from_logits

    def fn_kwargs(self):
        return {"from_logits": self.from_logits}

    def label_spec(self, y_pred):
        return y_pred.shape[:-1], dtypes.int32

    def call(self, y_true, y_pred):
        logits = y_pred if self.from_logits else _softmax_logits(y_pred)
        if logits is None:
            logits = ops.log(_clipped(y_pred))
        return nn.sparse_softmax_cross_entropy_with_logits(y_true, logits)


class CategoricalCrossentropy(Loss):
    fn = staticmethod(categorical_crossentropy)

    def __init__(self, from_logits=False, label_smoothing=0.0, axis=-1, reduction="sum_over_batch_size",
                 name="categorical_crossentropy", dtype=None):
        _class_axis(axis, "CategoricalCrossentropy")
        _check_probability_args("CategoricalCrossentropy", label_smoothing)
        super().__init__(name, reduction, dtype)
        self.from_logits, self.label_smoothing, self.axis = from_logits, float(label_smoothing), axis

    def fn_kwargs(self):
        return {"from_logits": self.from_logits, "label_smoothing": self.label_smoothing, "axis": self.axis}

    def call(self, y_true, y_pred):
        y_true = _smooth_categorical(y_true, self.label_smoothing)
        logits = y_pred if self.from_logits else _softmax_logits(y_pred)
        if logits is not None:
            return nn.softmax_cross_entropy_with_logits(y_true, logits)
        q = y_pred / reduce.reduce_sum(y_pred, axis=-1, keepdims=True)
        return ew.negative(reduce.reduce_sum(y_true * ops.log(_clipped(q)), axis=-1))


class BinaryCrossentropy(Loss):
    fn = staticmethod(binary_crossentropy)

    def __init__(self, from_logits=False, label_smoothing=0.0, axis=-1, reduction="sum_over_batch_size",
                 name="binary_crossentropy", dtype=None):
        _check_probability_args("BinaryCrossentropy", label_smoothing)
        super().__init__(name, reduction, dtype)
        self.from_logits, self.label_smoothing, self.axis = from_logits, float(label_smoothing), axis

    def fn_kwargs(self):
        return {"from_logits": self.from_logits, "label_smoothing": self.label_smoothing, "axis": self.axis}

    def call(self, y_true, y_pred):
        y_true = _smooth_binary(y_true, self.label_smoothing)
        sigmoid = y_pred.node.op.name == "sigmoid"     # Keras takes the logits of a sigmoid that made y_pred
        if self.from_logits or sigmoid:
            per = nn.sigmoid_cross_entropy_with_logits(y_true, y_pred.node.inputs[0] if sigmoid and not
                                                       self.from_logits else y_pred)
        else:
            per = _binary_values(y_true, y_pred, False)
        return ops.mean(per, axis=self.axis)


class BinaryFocalCrossentropy(Loss):
    fn = staticmethod(binary_focal_crossentropy)

    def __init__(self, apply_class_balancing=False, alpha=0.25, gamma=2.0, from_logits=False, label_smoothing=0.0,
                 axis=-1, reduction="sum_over_batch_size", name="binary_focal_crossentropy", dtype=None):
        _check_probability_args("BinaryFocalCrossentropy", label_smoothing)
        super().__init__(name, reduction, dtype)
        self.apply_class_balancing, self.alpha, self.gamma = apply_class_balancing, float(alpha), float(gamma)
        self.from_logits, self.label_smoothing, self.axis = from_logits, float(label_smoothing), axis

    def fn_kwargs(self):
        return {"apply_class_balancing": self.apply_class_balancing, "alpha": self.alpha, "gamma": self.gamma,
                "from_logits": self.from_logits, "label_smoothing": self.label_smoothing, "axis": self.axis}


class CategoricalFocalCrossentropy(Loss):
    fn = staticmethod(categorical_focal_crossentropy)

    def __init__(self, alpha=0.25, gamma=2.0, from_logits=False, label_smoothing=0.0, axis=-1,
                 reduction="sum_over_batch_size", name="categorical_focal_crossentropy", dtype=None):
        _check_probability_args("CategoricalFocalCrossentropy", label_smoothing)
        super().__init__(name, reduction, dtype)
        self.alpha, self.gamma = float(alpha), float(gamma)
        self.from_logits, self.label_smoothing, self.axis = from_logits, float(label_smoothing), axis

    def fn_kwargs(self):
        return {"alpha": self.alpha, "gamma": self.gamma, "from_logits": self.from_logits,
                "label_smoothing": self.label_smoothing, "axis": self.axis}
