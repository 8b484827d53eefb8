"""The same metric objects in ``compile(metrics=[...])``: what ``fit`` and ``evaluate`` report equals Keras 3's
metric computed on the model's own predictions, batch by batch, in both views and with the batch split over two
devices (101 examples in batches of 32: the last batch of 5 splits unevenly).  The learning rate is 0, so the
training epoch's metrics are those of the same predictions."""
import keras
import numpy as np
import pytest

import flowlayers as flow

PLACES = [("mirrored", 1), ("mirrored", 2), ("consistent", 2)]
IDS = [f"{v}{n}" for v, n in PLACES]
N, BATCH = 101, 32
RNG = np.random.default_rng(3)
X = RNG.normal(size=(N, 6)).astype("float32")


def _labels(kind):
    if kind == "binary":
        return (X[:, :1] + RNG.normal(size=(N, 1)) > 0).astype("float32")
    if kind == "classes":
        return np.eye(4, dtype="float32")[RNG.integers(0, 4, N)]
    if kind == "sparse":
        return RNG.integers(0, 4, N).astype("int32")
    return np.abs(X[:, :3] + RNG.normal(size=(N, 3))).astype("float32")


MODELS = {      # kind: (units, activation, loss, metrics as (class name, arguments))
    "binary": (1, "sigmoid", "binary_crossentropy", [
        ("AUC", {"num_thresholds": 21}), ("AUC", {"num_thresholds": 21, "curve": "PR"}), ("Precision", {}),
        ("Recall", {"thresholds": [0.3, 0.6]}), ("TruePositives", {}), ("FalsePositives", {}),
        ("TrueNegatives", {}), ("FalseNegatives", {"thresholds": [0.0, 0.5, 1.0]}), ("BinaryAccuracy", {}),
        ("BinaryCrossentropy", {}), ("SensitivityAtSpecificity", {"specificity": 0.5, "num_thresholds": 21}),
        ("F1Score", {"threshold": 0.5})]),
    "classes": (4, "softmax", "categorical_crossentropy", [
        ("CategoricalAccuracy", {}), ("TopKCategoricalAccuracy", {"k": 2}), ("F1Score", {"average": "macro"}),
        ("FBetaScore", {"average": "weighted", "beta": 2.0}), ("CategoricalCrossentropy", {}), ("KLDivergence", {}),
        ("Precision", {"top_k": 2}), ("Recall", {"class_id": 1}), ("AUC", {"multi_label": True, "num_thresholds": 11}),
        ("AUC", {"num_thresholds": 11, "curve": "PR"})]),
    "sparse": (4, "softmax", "sparse_categorical_crossentropy", [
        ("SparseCategoricalAccuracy", {}), ("SparseTopKCategoricalAccuracy", {"k": 2}),
        ("SparseCategoricalCrossentropy", {})]),
    "regression": (3, "softplus", "mse", [
        ("MeanSquaredError", {}), ("MeanAbsoluteError", {}), ("MeanAbsolutePercentageError", {}),
        ("MeanSquaredLogarithmicError", {}), ("RootMeanSquaredError", {}), ("CosineSimilarity", {}),
        ("LogCoshError", {}), ("R2Score", {}), ("Poisson", {})]),
}


def _model(kind, view, n, steps_per_execution=1):
    flow.config.set_view(view)
    flow.config.gpu_device_num(n)
    flow.clear_session()
    units, activation, loss, specs = MODELS[kind]
    x = flow.Input((6,))
    h = flow.layers.Dense(8, activation="relu")(x)
    model = flow.Model(x, flow.layers.Dense(units, activation=activation)(h))
    metrics = [getattr(flow.metrics, name)(**kwargs) for name, kwargs in specs]
    model.compile(flow.optimizers.SGD(0.0), loss, metrics=metrics, steps_per_execution=steps_per_execution)
    return model, metrics


def _keras_results(kind, y, predictions):
    """Each metric of ``kind`` by Keras 3, fed the predictions in fit's batches."""
    out = []
    for name, kwargs in MODELS[kind][3]:
        metric = getattr(keras.metrics, name)(**kwargs)
        for start in range(0, N, BATCH):
            metric.update_state(y[start:start + BATCH], predictions[start:start + BATCH])
        out.append(np.asarray(metric.result(), np.float64))
    return out


def _check(kind, metrics, logs, reference, where):
    for (name, kwargs), metric, expected in zip(MODELS[kind][3], metrics, reference):
        got = np.asarray(logs[metric.name], np.float64)
        diff = float(np.max(np.abs(got - expected)))
        assert diff <= 1e-6 * max(1.0, float(np.max(np.abs(expected)))), \
            f"{where}: {name}({kwargs}) = {got}, Keras: {expected} (diff {diff:.2e})"


@pytest.mark.slow
@pytest.mark.parametrize("kind", list(MODELS))
@pytest.mark.parametrize("view, n", PLACES, ids=IDS)
def test_fit_and_evaluate_report_what_keras_computes_on_the_predictions(kind, view, n):
    y = _labels(kind)
    model, metrics = _model(kind, view, n)
    history = model.fit(X, y, batch_size=BATCH, epochs=1, shuffle=False, verbose=0).history
    logs = model.evaluate(X, y, batch_size=BATCH, return_dict=True)
    reference = _keras_results(kind, y, model.predict(X, batch_size=BATCH))
    _check(kind, metrics, {k: v[0] for k, v in history.items()}, reference, f"fit {view}{n}")
    _check(kind, metrics, logs, reference, f"evaluate {view}{n}")


@pytest.mark.slow
def test_groups_of_steps_add_up_each_statistic():
    """``steps_per_execution``: the sums of several steps come back stacked, and each metric adds its own."""
    y = _labels("binary")
    model, metrics = _model("binary", "mirrored", 2, steps_per_execution=2)
    logs = model.evaluate(X, y, batch_size=BATCH, return_dict=True)
    _check("binary", metrics, logs, _keras_results("binary", y, model.predict(X, batch_size=BATCH)), "grouped")


@pytest.mark.slow
def test_keras_default_auc_in_a_model():
    """AUC with Keras' 200 thresholds, computed in the step (its 402 sums) and on the host."""
    y = _labels("binary")
    flow.config.set_view("mirrored")
    flow.config.gpu_device_num(2)
    x = flow.Input((6,))
    model = flow.Model(x, flow.layers.Dense(1, activation="sigmoid")(x))
    model.compile("sgd", "binary_crossentropy", metrics=["AUC", flow.metrics.AUC(curve="PR")])
    logs = model.evaluate(X, y, batch_size=BATCH, return_dict=True)
    predictions = model.predict(X, batch_size=BATCH)
    for name, curve in (("AUC", "ROC"), ("auc", "PR")):
        expected = keras.metrics.AUC(curve=curve)
        expected.update_state(y, predictions)
        assert logs[name] == pytest.approx(float(expected.result()), abs=1e-6)
    standalone = flow.metrics.AUC()
    standalone.update_state(y, predictions)
    assert standalone.result() == pytest.approx(logs["AUC"], abs=1e-12)
