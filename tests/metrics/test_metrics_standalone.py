"""Every metric used on its own, as in Keras 3: ``update_state`` over several batches (with and without sample
weights), then ``result``, equal to Keras 3's own metric on the same arrays; ``reset_state``; the config round
trip; Keras' default names.  No engine runs: a metric on its own computes on the host."""
import keras
import numpy as np
import pytest

import flowlayers as flow

RNG = np.random.default_rng(7)
B, C = 16, 4


def _data(kind):
    """Three batches ``(y_true, y_pred, sample_weight)`` of one kind of problem."""
    out = []
    for _ in range(3):
        if kind == "binary":
            y, p = (RNG.random((B, 1)) > .5), RNG.random((B, 1))
        elif kind == "multi":       # several labels per example
            y, p = (RNG.random((B, C)) > .5), RNG.random((B, C))
        elif kind == "onehot":
            y, p = np.eye(C)[RNG.integers(0, C, B)], RNG.random((B, C))
            p = p / p.sum(-1, keepdims=True)
        elif kind == "sparse":
            y, p = RNG.integers(0, C, B), RNG.random((B, C))
            p = p / p.sum(-1, keepdims=True)
        elif kind == "sorted":      # class ids, best first
            y, p = RNG.integers(0, C, B), np.argsort(-RNG.random((B, C)), axis=-1)[:, :3]
        elif kind == "logits":
            y, p = (RNG.random((B, C)) > .5), RNG.normal(size=(B, C)) * 3
        elif kind == "regression":
            y = RNG.normal(size=(B, C))
            p = y + RNG.normal(size=(B, C)) * .5
        else:                       # positive values
            y, p = RNG.random((B, C)) * 3, RNG.random((B, C)) * 3
        out.append((y.astype("float32"), p.astype("float32"), RNG.random(B).astype("float32")))
    return out


CASES = [
    ("Accuracy", {}, "binary"), ("BinaryAccuracy", {}, "binary"), ("BinaryAccuracy", {"threshold": 0.3}, "multi"),
    ("CategoricalAccuracy", {}, "onehot"), ("SparseCategoricalAccuracy", {}, "sparse"),
    ("TopKCategoricalAccuracy", {"k": 2}, "onehot"), ("SparseTopKCategoricalAccuracy", {}, "sparse"),
    ("SparseTopKCategoricalAccuracy", {"k": 2}, "sparse"),
    ("SparseTopKCategoricalAccuracy", {"k": 2, "from_sorted_ids": True}, "sorted"),
    ("TruePositives", {}, "binary"), ("FalsePositives", {"thresholds": [0.2, 0.5, 0.9]}, "multi"),
    ("TrueNegatives", {"thresholds": [0.0, 0.5, 1.0]}, "binary"), ("FalseNegatives", {}, "multi"),
    ("Precision", {}, "binary"), ("Precision", {"top_k": 2}, "multi"), ("Precision", {"class_id": 1}, "multi"),
    ("Precision", {"thresholds": [0.0, 0.25, 0.5, 0.75, 1.0]}, "multi"),
    ("Recall", {"thresholds": [0.3, 0.6]}, "multi"), ("Recall", {"top_k": 1, "class_id": 2}, "multi"),
    ("AUC", {}, "binary"), ("AUC", {"curve": "PR"}, "binary"), ("AUC", {"summation_method": "majoring"}, "multi"),
    ("AUC", {"curve": "PR", "summation_method": "minoring"}, "multi"), ("AUC", {"curve": "PRGAIN"}, "binary"),
    ("AUC", {"multi_label": True}, "multi"),
    ("AUC", {"multi_label": True, "label_weights": [1.0, 2.0, 0.5, 1.0], "curve": "PR"}, "multi"),
    ("AUC", {"label_weights": [1.0, 2.0, 0.5, 1.0]}, "multi"), ("AUC", {"thresholds": [0.1, 0.5, 0.7]}, "binary"),
    ("AUC", {"num_thresholds": 11, "from_logits": True}, "logits"),
    ("SensitivityAtSpecificity", {"specificity": 0.5}, "binary"),
    ("SpecificityAtSensitivity", {"sensitivity": 0.5, "num_thresholds": 1}, "binary"),
    ("PrecisionAtRecall", {"recall": 0.5}, "binary"), ("RecallAtPrecision", {"precision": 0.5}, "binary"),
    ("F1Score", {}, "onehot"), ("F1Score", {"average": "micro", "threshold": 0.3}, "multi"),
    ("F1Score", {"average": "macro"}, "onehot"), ("FBetaScore", {"average": "weighted", "beta": 2.0}, "onehot"),
    ("MeanSquaredError", {}, "regression"), ("MeanAbsoluteError", {}, "regression"),
    ("MeanAbsolutePercentageError", {}, "regression"), ("MeanSquaredLogarithmicError", {}, "positive"),
    ("RootMeanSquaredError", {}, "regression"), ("CosineSimilarity", {}, "regression"),
    ("LogCoshError", {}, "regression"), ("R2Score", {}, "regression"), ("R2Score", {"class_aggregation": None},
                                                                         "regression"),
    ("R2Score", {"class_aggregation": "variance_weighted_average", "num_regressors": 2}, "regression"),
    ("BinaryCrossentropy", {}, "multi"), ("BinaryCrossentropy", {"from_logits": True, "label_smoothing": 0.1},
                                          "logits"),
    ("CategoricalCrossentropy", {}, "onehot"), ("CategoricalCrossentropy", {"from_logits": True,
                                                                           "label_smoothing": 0.2}, "onehot"),
    ("SparseCategoricalCrossentropy", {}, "sparse"), ("SparseCategoricalCrossentropy", {"from_logits": True},
                                                      "sparse"),
    ("KLDivergence", {}, "onehot"), ("Poisson", {}, "positive"),
]


def close(ours, theirs):
    """The largest difference, and whether it is within 1e-6 of the value's scale (at least 1)."""
    ours, theirs = np.asarray(ours, np.float64), np.asarray(theirs, np.float64)
    assert ours.shape == theirs.shape
    diff = float(np.max(np.abs(ours - theirs)))
    return diff, diff <= 1e-6 * max(1.0, float(np.max(np.abs(theirs))))


@pytest.mark.parametrize("weighted", [False, True], ids=["unweighted", "weighted"])
@pytest.mark.parametrize("name, kwargs, kind", CASES, ids=[f"{n}-{k}" for n, k, _ in CASES])
def test_update_state_then_result_equals_keras(name, kwargs, kind, weighted):
    ours, theirs = getattr(flow.metrics, name)(**kwargs), getattr(keras.metrics, name)(**kwargs)
    for y, p, w in _data(kind):
        ours.update_state(y, p, sample_weight=w if weighted else None)
        theirs.update_state(y, p, sample_weight=w if weighted else None)
    diff, ok = close(ours.result(), theirs.result())
    assert ok, f"{name}({kwargs}): {ours.result()} against Keras' {np.asarray(theirs.result())} (diff {diff:.2e})"


@pytest.mark.parametrize("name, kwargs, kind", CASES[::3], ids=[f"{n}-{k}" for n, k, _ in CASES[::3]])
def test_reset_state_starts_again_and_the_config_makes_the_same_metric(name, kwargs, kind):
    ours, theirs = getattr(flow.metrics, name)(**kwargs), getattr(keras.metrics, name)(**kwargs)
    data = _data(kind)
    for y, p, w in data:
        ours.update_state(y, p, sample_weight=w)
    first = ours.result()
    ours.reset_state()
    if not name.startswith("R2"):       # R2's empty state is no score
        assert np.all(np.asarray(ours.result()) == 0)
    copy = type(ours).from_config(ours.get_config())
    for metric in (ours, copy):
        for y, p, w in data:
            metric.update_state(y, p, sample_weight=w)
        np.testing.assert_array_equal(metric.result(), first)
    config, keras_config = ours.get_config(), theirs.get_config()
    assert copy.get_config() == config and config["dtype"] == "float32"
    missing = set(keras_config) - set(config)
    assert not missing, f"{name}: Keras' config has {sorted(missing)}, ours does not"


def test_mean_and_sum_take_values_with_keras_weighing():
    for shape in [(4,), (4, 3), (4, 3, 2)]:
        values, weights = RNG.random(shape).astype("float32"), RNG.random(shape[:2]).astype("float32")
        for cls in ("Mean", "Sum"):
            for w in (None, weights.reshape(len(weights), -1)[:, 0], weights):
                ours, theirs = getattr(flow.metrics, cls)(), getattr(keras.metrics, cls)()
                for _ in range(2):
                    ours.update_state(values, sample_weight=w)
                    theirs.update_state(values, sample_weight=w)
                assert close(ours.result(), theirs.result())[1], (cls, shape, w is None)
    m = flow.metrics.Mean()
    m.update_state([1, 3, 5, 7], sample_weight=[1, 1, 0, 0])
    assert m.result() == 2.0 and m.name == "mean" and m.dtype == "float32"
    assert flow.metrics.Mean()([2.0]) == 2.0        # calling updates and returns the result, as in Keras


def test_float64_metrics_compute_in_float64():
    y = RNG.normal(size=(8, 3))
    p = y + 1e-9        # differences float32 cannot hold
    m = flow.metrics.MeanAbsoluteError(dtype="float64")
    m.update_state(y, p)
    assert m.result() == pytest.approx(1e-9, rel=1e-6) and m.dtype == "float64"
    assert flow.metrics.MeanAbsoluteError().result() == 0.0


def test_keras_default_names_and_automatic_numbering():
    assert [flow.metrics.AUC().name, flow.metrics.AUC().name] == ["auc", "auc_1"]
    assert flow.metrics.TruePositives().name == "true_positives"
    assert flow.metrics.Precision(name="p").name == "p"
    assert flow.metrics.F1Score().name == "f1_score" and flow.metrics.LogCoshError().name == "logcosh"
    assert flow.metrics.MeanMetricWrapper(flow.metrics.mean_squared_error).name == "mean_metric_wrapper"


def test_a_function_of_predictions_is_one_value_per_example():
    y, p, _ = _data("sparse")[0]
    np.testing.assert_allclose(flow.metrics.sparse_top_k_categorical_accuracy(y, p, k=2),
                               keras.metrics.sparse_top_k_categorical_accuracy(y, p, k=2), atol=0)
    y, p, _ = _data("regression")[0]
    np.testing.assert_allclose(flow.metrics.log_cosh(y, p), keras.metrics.log_cosh(y, p), atol=1e-6)
    wrapped = flow.metrics.MeanMetricWrapper(lambda a, b: np.abs(a - b), name="mad")
    wrapped.update_state(y, p)
    assert wrapped.result() == pytest.approx(float(np.mean(np.abs(y - p))), rel=1e-6)


def test_several_thresholds_give_one_value_each():
    m = flow.metrics.Precision(thresholds=[0.2, 0.8])
    m.update_state([1, 0, 1, 1], [0.9, 0.9, 0.5, 0.1])
    np.testing.assert_allclose(m.result(), [2 / 3, 1 / 2])
    assert not m.scalar_result


@pytest.mark.parametrize("make, words", [
    (lambda: flow.metrics.AUC(curve="ROCK"), "curve expected one of"),
    (lambda: flow.metrics.AUC(summation_method="trapezoid"), "summation_method expected one of"),
    (lambda: flow.metrics.AUC(num_thresholds=1), "num_thresholds expected an integer > 1"),
    (lambda: flow.metrics.AUC(num_labels=3), "num_labels expected only with multi_label=True"),
    (lambda: flow.metrics.Precision(thresholds=[0.5, 1.5]), "thresholds expected values in [0, 1]"),
    (lambda: flow.metrics.F1Score(average="mean"), "average expected one of"),
    (lambda: flow.metrics.FBetaScore(beta=2), "beta expected a Python float > 0"),
    (lambda: flow.metrics.F1Score(threshold=1), "threshold expected None or a Python float"),
    (lambda: flow.metrics.R2Score(class_aggregation="median"), "class_aggregation expected one of"),
    (lambda: flow.metrics.SensitivityAtSpecificity(1.5), "specificity expected a value in [0, 1]"),
    (lambda: flow.metrics.SparseCategoricalCrossentropy(ignore_class=0), "ignore_class expected None"),
    (lambda: flow.metrics.Mean(dtype="int32"), "expected a float dtype"),
])
def test_arguments_keras_refuses_are_refused_by_name(make, words):
    with pytest.raises(flow.ConfigError, match=words.replace("[", r"\[").replace("]", r"\]")):
        make()


def test_data_of_another_shape_is_refused_and_the_metric_stays_usable():
    m = flow.metrics.AUC(multi_label=True)
    m.update_state(np.ones((2, 3)), np.full((2, 3), 0.7))
    with pytest.raises(flow.InputError, match="expected 3 labels"):
        m.update_state(np.ones((2, 4)), np.full((2, 4), 0.7))
    with pytest.raises(flow.InputError, match="R2Score.*expected 2D labels"):
        flow.metrics.R2Score().update_state(np.ones(3), np.ones(3))
    with pytest.raises(flow.InputError, match="expected numbers"):
        m.update_state([["a"]], [[0.1]])
    m.update_state(np.zeros((2, 3)), np.full((2, 3), 0.2))
    assert m.result() == 1.0
