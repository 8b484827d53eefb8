"""Metrics of confusion counts: true and false positives and negatives at thresholds, and what Keras 3 derives from
them (Precision, Recall, AUC, sensitivity and specificity at a constraint, F-scores).

Their state is counts, each a sum over examples (weighted on the host): per threshold (and per label) the positive
examples above it and the negative ones above it, and the positives and negatives in all.  False negatives and
true negatives are what is left of those.  A prediction is above threshold ``t`` where ``y_pred > t``; for evenly
spaced thresholds Keras buckets predictions clipped into [0, 1] instead, and so does this, to count alike.
"""
import numpy as np

from ..errors import ConfigError, InputError
from . import arrays as A
from .base import Metric, divide_no_nan

NEG_INF = -1e10     # Keras' value for predictions outside the top k


def parse_thresholds(thresholds, default, what):
    """Keras' thresholds: a number or a list of numbers in [0, 1]; ``default`` where None."""
    if thresholds is None:
        return [default]
    values = list(thresholds) if isinstance(thresholds, (list, tuple, np.ndarray)) else [thresholds]
    bad = [t for t in values if t is None or not 0 <= t <= 1]
    if bad or not values:
        raise ConfigError(f"{what}: thresholds expected values in [0, 1], received {thresholds!r}")
    return [float(t) for t in values]


def evenly_spaced(thresholds):
    """Keras' ``is_evenly_distributed_thresholds``: at least 3, equal to ``i / (n - 1)`` within 1e-7."""
    n = len(thresholds)
    return n >= 3 and np.allclose(thresholds, np.arange(n, dtype=np.float32) / (n - 1), atol=1e-7)


class Counts:
    """How a metric counts: at ``thresholds`` (``evenly``: Keras' bucketed form), optionally per label
    (``multi_label``) or weighing labels (``label_weights``), after keeping the ``top_k`` predictions or only
    class ``class_id``."""

    def __init__(self, thresholds, evenly, multi_label=False, label_weights=None, top_k=None, class_id=None):
        self.thresholds, self.evenly, self.multi_label = list(thresholds), evenly, multi_label
        self.with_epsilon = evenly and (self.thresholds[0] < 0.0 or self.thresholds[-1] > 1.0)
        self.label_weights, self.top_k, self.class_id = label_weights, top_k, class_id

    def parts(self, y_true, y_pred, sample_weight, labels, what):
        """The arrays whose sums are, in order: per threshold (and label) the positives above it, the negatives
        above it; the positives; the negatives.  ``labels``: how many labels a multi-label state has."""
        dtype = A.dtype_of(y_pred)
        y_pred, y_true = A.same_rank(y_pred, A.cast(y_true, dtype))
        if tuple(A.shape(y_pred)[1:]) != tuple(A.shape(y_true)[1:]):
            raise InputError(f"{what}: expected labels of the predictions' shape {A.shape(y_pred)}, received "
                             f"{A.shape(y_true)}")
        weight = None
        if sample_weight is not None:       # on the host
            _, weight = A.same_rank(y_true, np.expand_dims(sample_weight, -1), expand_rank_1=False)
        if self.top_k is not None:
            mask = A.top_k_mask(y_pred, self.top_k)
            y_pred = y_pred * mask + NEG_INF * (1.0 - mask)
        if self.class_id is not None:
            if len(A.shape(y_pred)) == 1:
                raise InputError(f"{what}: class_id expected predictions of shape (num_samples, num_classes), "
                                 f"received shape {A.shape(y_pred)}")
            y_true, y_pred = A.column(y_true, self.class_id), A.column(y_pred, self.class_id)
        negative = A.cast(A.equal(y_true, 0.0), dtype)
        positive = 1.0 - negative
        if weight is not None:
            try:
                weight = np.broadcast_to(weight, y_pred.shape).astype(dtype.numpy)
            except ValueError:
                raise InputError(f"{what}: sample_weight expected a shape that broadcasts to the predictions' "
                                 f"{y_pred.shape}, received {sample_weight.shape}") from None
        if self.label_weights is not None and not self.multi_label:
            row = A.constant(self.label_weights, y_pred)
            weight = row if weight is None else weight * row
        if weight is not None:
            positive, negative = positive * weight, negative * weight
        above = self._above(y_pred, dtype)     # (..., thresholds)
        count = len(self.thresholds)
        width = int(np.prod(A.shape(above)[1:]))
        if self.multi_label:        # per threshold, per label: entry (label, threshold)
            groups = [[label * count + i] for i in range(count) for label in range(labels)]
            totals = A.columns(positive, labels) + A.columns(negative, labels)
        else:                       # per threshold, every entry
            groups = [list(range(i, width, count)) for i in range(count)]
            totals = [positive, negative]
        return A.grouped_sums([A.expand_last(positive) * above, A.expand_last(negative) * above], groups) + totals

    def _above(self, y_pred, dtype):
        """1 where a prediction is above a threshold, along a new last axis of one entry per threshold."""
        count = len(self.thresholds)
        if not self.evenly:
            values, cuts = y_pred, self.thresholds
        else:
            # Keras' buckets: bucket(p) = ceil(p * (n - 1)) - 1 of p clipped into [0, 1] (at least 0 where the first
            # threshold is below 0), counted at every threshold up to it: above threshold i where p * (n - 1) > i
            values = A.clip(y_pred, 0.0, 1.0) * float(count - 1)
            cuts = [-1.0 if i == 0 and self.with_epsilon else float(i) for i in range(count)]
        return A.cast(A.greater(A.expand_last(values), A.constant(cuts, y_pred)), dtype)


def unpack(state, thresholds, labels=1):
    """``(tp, fp, tn, fn)`` from a state of counts: shape ``(thresholds,)``, or ``(thresholds, labels)``."""
    n = thresholds * labels
    shape = (thresholds, labels) if labels > 1 else (thresholds,)
    tp, fp = state[:n].reshape(shape), state[n:2 * n].reshape(shape)
    positives, negatives = state[2 * n:2 * n + labels], state[2 * n + labels:2 * n + 2 * labels]
    if labels == 1:
        positives, negatives = positives[0], negatives[0]
    return tp, fp, negatives - fp, positives - tp


class _Counted(Metric):
    """A metric of the counts of one ``Counts``."""

    def _state_size(self):
        return 2 * len(self._counts.thresholds) + 2

    def _parts(self, y_true, y_pred, sample_weight):
        return self._counts.parts(y_true, y_pred, sample_weight, 1, f"metric {self.name!r}")

    def _confusion(self, state):
        return unpack(state, len(self._counts.thresholds))

    @property
    def scalar_result(self):
        return len(self._counts.thresholds) == 1


def _one_or_all(values):
    return values[0] if len(values) == 1 else values


class _ConfusionCount(_Counted):
    _which = None       # index into (tp, fp, tn, fn)

    def __init__(self, thresholds=None, name=None, dtype=None):
        self.init_thresholds = thresholds
        self.thresholds = parse_thresholds(thresholds, 0.5, type(self).__name__)
        self._counts = Counts(self.thresholds, evenly_spaced(self.thresholds))
        super().__init__(name, dtype)

    def _result(self, state):
        return _one_or_all(self._confusion(state)[self._which])

    def get_config(self):
        return {**super().get_config(), "thresholds": self.init_thresholds}


class TruePositives(_ConfusionCount):
    """The (weighted) number of positive examples predicted above each threshold (default 0.5)."""
    _which = 0


class FalsePositives(_ConfusionCount):
    """The (weighted) number of negative examples predicted above each threshold (default 0.5)."""
    _which = 1


class TrueNegatives(_ConfusionCount):
    """The (weighted) number of negative examples predicted at or below each threshold (default 0.5)."""
    _which = 2


class FalseNegatives(_ConfusionCount):
    """The (weighted) number of positive examples predicted at or below each threshold (default 0.5)."""
    _which = 3


class _PrecisionRecall(_Counted):
    def __init__(self, thresholds=None, top_k=None, class_id=None, name=None, dtype=None):
        self.init_thresholds, self.top_k, self.class_id = thresholds, top_k, class_id
        self.thresholds = parse_thresholds(thresholds, 0.5 if top_k is None else NEG_INF, type(self).__name__)
        self._counts = Counts(self.thresholds, evenly_spaced(self.thresholds), top_k=top_k, class_id=class_id)
        super().__init__(name, dtype)

    def get_config(self):
        return {**super().get_config(), "thresholds": self.init_thresholds, "top_k": self.top_k,
                "class_id": self.class_id}


class Precision(_PrecisionRecall):
    """``tp / (tp + fp)`` at each threshold (default 0.5); ``top_k``: only the k largest predictions of an example
    count as predicted; ``class_id``: only that class's column."""
    _direction = "up"

    def _result(self, state):
        tp, fp, _, _ = self._confusion(state)
        return _one_or_all(divide_no_nan(tp, tp + fp))


class Recall(_PrecisionRecall):
    """``tp / (tp + fn)`` at each threshold (default 0.5); ``top_k`` and ``class_id`` as for Precision."""
    _direction = "up"

    def _result(self, state):
        tp, _, _, fn = self._confusion(state)
        return _one_or_all(divide_no_nan(tp, tp + fn))


class _AtConstraint(_Counted):
    """Keras' SensitivitySpecificityBase: the best of one rate where another meets ``value``, over
    ``num_thresholds`` evenly spaced thresholds."""

    def __init__(self, value, num_thresholds, class_id, name, dtype, what):
        if not 0 <= value <= 1:
            raise ConfigError(f"{type(self).__name__}: {what} expected a value in [0, 1], received {value!r}")
        if num_thresholds <= 0:
            raise ConfigError(f"{type(self).__name__}: num_thresholds expected an integer > 0, received "
                              f"{num_thresholds!r}")
        self.value, self.num_thresholds, self.class_id = value, num_thresholds, class_id
        if num_thresholds == 1:
            thresholds, evenly = [0.5], False
        else:
            thresholds = [0.0] + [(i + 1) / (num_thresholds - 1) for i in range(num_thresholds - 2)] + [1.0]
            evenly = True
        self.thresholds = thresholds
        self._counts = Counts(thresholds, evenly, class_id=class_id)
        super().__init__(name, dtype)

    @property
    def scalar_result(self):
        return True

    def _rates(self, state):
        tp, fp, tn, fn = self._confusion(state)
        return {"sensitivity": divide_no_nan(tp, tp + fn), "specificity": divide_no_nan(tn, tn + fp),
                "precision": divide_no_nan(tp, tp + fp)}

    def _best(self, state, constrained, dependent):
        rates = self._rates(state)
        feasible = rates[constrained] >= self.value
        return max(float(np.max(np.where(feasible, rates[dependent], 0.0))), 0.0)

    def get_config(self):
        return {**super().get_config(), "num_thresholds": self.num_thresholds, "class_id": self.class_id}


class SensitivityAtSpecificity(_AtConstraint):
    """The best sensitivity (recall) where the specificity is at least ``specificity``."""
    _direction = "up"

    def __init__(self, specificity, num_thresholds=200, class_id=None, name=None, dtype=None):
        self.specificity = specificity
        super().__init__(specificity, num_thresholds, class_id, name, dtype, "specificity")

    def _result(self, state):
        return self._best(state, "specificity", "sensitivity")

    def get_config(self):
        return {**super().get_config(), "specificity": self.specificity}


class SpecificityAtSensitivity(_AtConstraint):
    """The best specificity where the sensitivity (recall) is at least ``sensitivity``."""
    _direction = "up"

    def __init__(self, sensitivity, num_thresholds=200, class_id=None, name=None, dtype=None):
        self.sensitivity = sensitivity
        super().__init__(sensitivity, num_thresholds, class_id, name, dtype, "sensitivity")

    def _result(self, state):
        return self._best(state, "sensitivity", "specificity")

    def get_config(self):
        return {**super().get_config(), "sensitivity": self.sensitivity}


class PrecisionAtRecall(_AtConstraint):
    """The best precision where the recall is at least ``recall``."""
    _direction = "up"

    def __init__(self, recall, num_thresholds=200, class_id=None, name=None, dtype=None):
        self.recall = recall
        super().__init__(recall, num_thresholds, class_id, name, dtype, "recall")

    def _result(self, state):
        return self._best(state, "sensitivity", "precision")

    def get_config(self):
        return {**super().get_config(), "recall": self.recall}


class RecallAtPrecision(_AtConstraint):
    """The best recall where the precision is at least ``precision``."""
    _direction = "up"

    def __init__(self, precision, num_thresholds=200, class_id=None, name=None, dtype=None):
        self.precision = precision
        super().__init__(precision, num_thresholds, class_id, name, dtype, "precision")

    def _result(self, state):
        return self._best(state, "precision", "sensitivity")

    def get_config(self):
        return {**super().get_config(), "precision": self.precision}


_CURVES = {"roc": "ROC", "pr": "PR", "prgain": "PRGAIN"}
_SUMMATIONS = {"interpolation": "interpolation", "majoring": "majoring", "minoring": "minoring"}


class AUC(Metric):
    """The area under the ROC or precision-recall curve, by a Riemann sum over ``num_thresholds`` thresholds
    (Keras 3's AUC: the same thresholds, counts and sums).

    ``curve``: ``"ROC"``, ``"PR"`` or ``"PRGAIN"``; ``summation_method``: ``"interpolation"`` (for PR, Davis and
    Goadrich's interpolation of the counts), ``"minoring"`` or ``"majoring"``; ``thresholds``: the inner
    thresholds (0 - epsilon and 1 + epsilon are added); ``multi_label``: one curve per label (column), their
    areas averaged (weighted by ``label_weights``), else every entry counts as one example (``label_weights``
    weighs the columns); ``from_logits``: predictions are logits (a sigmoid is applied)."""
    _direction = "up"

    def __init__(self, num_thresholds=200, curve="ROC", summation_method="interpolation", name=None, dtype=None,
                 thresholds=None, multi_label=False, num_labels=None, label_weights=None, from_logits=False):
        if curve not in ("ROC", "roc", "PR", "pr", "PRGAIN", "prgain"):
            raise ConfigError(f"AUC: curve expected one of ['ROC', 'PR', 'PRGAIN'], received {curve!r}")
        if str(summation_method).lower() not in _SUMMATIONS or str(summation_method)[1:].lower() != \
                str(summation_method)[1:]:
            raise ConfigError(f"AUC: summation_method expected one of ['interpolation', 'majoring', 'minoring'], "
                              f"received {summation_method!r}")
        self._init_from_thresholds = thresholds is not None
        if thresholds is not None:
            inner = sorted(parse_thresholds(thresholds, None, "AUC"))
            self.num_thresholds = len(inner) + 2
            evenly = evenly_spaced(np.array([0.0] + inner + [1.0]))
        else:
            if num_thresholds <= 1:
                raise ConfigError(f"AUC: num_thresholds expected an integer > 1, received {num_thresholds!r}")
            self.num_thresholds = num_thresholds
            inner = [(i + 1) * 1.0 / (num_thresholds - 1) for i in range(num_thresholds - 2)]
            evenly = True
        if not multi_label and num_labels:
            raise ConfigError(f"AUC: num_labels expected only with multi_label=True, received "
                              f"num_labels={num_labels!r}")
        self._thresholds = [0.0 - A.EPSILON] + inner + [1.0 + A.EPSILON]
        self.curve, self.summation_method = _CURVES[str(curve).lower()], _SUMMATIONS[str(summation_method).lower()]
        self.multi_label, self.num_labels, self._from_logits = multi_label, num_labels, from_logits
        self.label_weights = None if label_weights is None else np.asarray(label_weights, np.float64)
        self._labels = (num_labels or None) if multi_label else 1
        self._counts = Counts(self._thresholds, evenly, multi_label, self.label_weights)
        super().__init__(name or None, dtype)

    @property
    def thresholds(self):
        return list(self._thresholds)

    def _state_size(self):
        return None if self._labels is None else 2 * self.num_thresholds * self._labels + 2 * self._labels

    def _parts(self, y_true, y_pred, sample_weight):
        what = f"metric {self.name!r} (AUC)"
        if self.multi_label:
            if len(A.shape(y_pred)) != 2:
                raise InputError(f"{what}: multi_label expected predictions of rank 2, received shape "
                                 f"{A.shape(y_pred)}")
            if self._labels is None:
                self._labels = A.shape(y_pred)[-1]
            elif A.shape(y_pred)[-1] != self._labels:
                raise InputError(f"{what}: expected {self._labels} labels (columns), received predictions of shape "
                                 f"{A.shape(y_pred)}")
        if self._from_logits:
            y_pred = A.sigmoid(y_pred)
        return self._counts.parts(y_true, y_pred, sample_weight, self._labels, what)

    def _result(self, state):
        tp, fp, tn, fn = unpack(state, self.num_thresholds, self._labels or 1)
        if self.curve == "PR" and self.summation_method == "interpolation":
            return self._over_labels(self._interpolated_pr(tp, fp, fn))
        n = self.num_thresholds
        recall = divide_no_nan(tp, tp + fn)
        if self.curve == "ROC":
            x, y = divide_no_nan(fp, fp + tn), recall
        elif self.curve == "PR":
            x, y = recall, divide_no_nan(tp, tp + fp)
        else:
            scale = divide_no_nan(tp + fn, tn + fp)
            recall_gain = np.maximum(np.where(tp == 0, 0.0, 1.0 - scale * divide_no_nan(fn, tp)), 0.0)
            precision_gain = np.where(tp == 0, 1.0, 1.0 - scale * divide_no_nan(fp, tp))
            x, y = recall_gain, precision_gain
        if self.summation_method == "interpolation":
            heights = (y[:n - 1] + y[1:]) / 2.0
        elif self.summation_method == "minoring":
            heights = np.minimum(y[:n - 1], y[1:])
        else:
            heights = np.maximum(y[:n - 1], y[1:])
        return self._over_labels((x[:n - 1] - x[1:]) * heights)

    def _interpolated_pr(self, tp, fp, fn):
        """Davis and Goadrich (2006): between two thresholds the true positives change linearly with the
        positive predictions, and the precision is integrated along that line."""
        n = self.num_thresholds
        dtp = tp[:n - 1] - tp[1:]
        p = tp + fp
        dp = p[:n - 1] - p[1:]
        slope = divide_no_nan(dtp, np.maximum(dp, 0))
        intercept = tp[1:] - slope * p[1:]
        both = (p[:n - 1] > 0) & (p[1:] > 0)
        ratio = np.where(both, divide_no_nan(p[:n - 1], np.maximum(p[1:], 0)), 1.0)
        with np.errstate(divide="ignore"):
            log_ratio = np.log(np.where(both, ratio, 1.0))
        return divide_no_nan(slope * (dtp + intercept * log_ratio), np.maximum(tp[1:] + fn[1:], 0))

    def _over_labels(self, terms):
        if not self.multi_label:
            return np.sum(terms)
        by_label = np.sum(terms, axis=0)
        if self.label_weights is None:
            return np.mean(by_label)
        return divide_no_nan(np.sum(by_label * self.label_weights), np.sum(self.label_weights))

    def get_config(self):
        config = {**super().get_config(), "num_thresholds": self.num_thresholds, "curve": self.curve,
                  "summation_method": self.summation_method, "multi_label": self.multi_label,
                  "num_labels": self.num_labels,
                  "label_weights": None if self.label_weights is None else self.label_weights.tolist(),
                  "from_logits": self._from_logits}
        if self._init_from_thresholds:
            config["thresholds"] = self.thresholds[1:-1]
        return config


class FBetaScore(Metric):
    """The F-beta score per class: ``(1 + beta**2) * precision * recall / (beta**2 * precision + recall)``, from
    true and false positives and false negatives per class (``average``: None, one per class; ``"micro"``, of the
    counts summed over classes; ``"macro"``, their mean; ``"weighted"``, weighted by each class's labels).
    ``threshold``: a prediction above it counts as positive; None, the largest of each example."""
    _direction = "up"

    def __init__(self, average=None, beta=1.0, threshold=None, name="fbeta_score", dtype=None):
        what = type(self).__name__
        if average not in (None, "micro", "macro", "weighted"):
            raise ConfigError(f"{what}: average expected one of None, 'micro', 'macro', 'weighted', received "
                              f"{average!r}")
        if not isinstance(beta, float) or beta <= 0.0:
            raise ConfigError(f"{what}: beta expected a Python float > 0, received {beta!r}")
        if threshold is not None and (not isinstance(threshold, float) or not 0.0 < threshold <= 1.0):
            raise ConfigError(f"{what}: threshold expected None or a Python float with 0 < threshold <= 1, "
                              f"received {threshold!r}")
        self.average, self.beta, self.threshold = average, beta, threshold
        self._classes = None
        super().__init__(name, dtype)

    @property
    def scalar_result(self):
        return self.average is not None

    def _parts(self, y_true, y_pred, sample_weight):
        if len(A.shape(y_pred)) != 2 or len(A.shape(y_true)) != 2:
            raise InputError(f"metric {self.name!r} ({type(self).__name__}): expected 2D labels and predictions of "
                             f"shape (batch_size, output_dim), received {A.shape(y_true)} and {A.shape(y_pred)}")
        dtype = A.dtype_of(y_pred)
        self._classes = A.shape(y_pred)[-1]
        if self.threshold is None:      # the largest prediction of each example (and not zero)
            top = A.largest(y_pred, keepdims=True)
            predicted = (1.0 - A.cast(A.greater(top, y_pred), dtype)) * A.cast(A.greater(A.abs(y_pred), 1e-9), dtype)
        else:
            predicted = A.cast(A.greater(y_pred, self.threshold), dtype)
        y_true = A.cast(y_true, dtype)
        counts = [predicted * y_true, predicted * (1.0 - y_true), (1.0 - predicted) * y_true, y_true]
        if sample_weight is not None:
            counts = [c * sample_weight[:, None] for c in counts]
        if self.average == "micro":
            return counts
        return [p for c in counts for p in A.columns(c, self._classes)]

    def _result(self, state):
        k = len(state) // 4
        tp, fp, fn, weights = (state[i * k:(i + 1) * k] for i in range(4))
        precision = tp / (tp + fp + A.EPSILON)
        recall = tp / (tp + fn + A.EPSILON)
        beta2 = self.beta ** 2
        score = precision * recall / (beta2 * precision + recall + A.EPSILON) * (1 + beta2)
        if self.average == "weighted":
            return np.sum(score * weights / (np.sum(weights) + A.EPSILON))
        if self.average is not None:
            return np.mean(score)
        return score

    def get_config(self):
        return {**super().get_config(), "average": self.average, "beta": self.beta, "threshold": self.threshold}


class F1Score(FBetaScore):
    """The F1 score: FBetaScore with ``beta=1``."""

    def __init__(self, average=None, threshold=None, name="f1_score", dtype=None):
        super().__init__(average, 1.0, threshold, name, dtype)

    def get_config(self):
        config = super().get_config()
        del config["beta"]
        return config

