"""Keras 3's hinge metrics and the metric functions that are Keras' loss functions: on their own they equal
Keras' (weighted too), and in a model ``evaluate`` reports what Keras computes on the model's predictions, the batch
split over two devices in both views."""
import keras
import numpy as np
import pytest

import flowlayers as flow

RNG = np.random.default_rng(9)


def _batches(kind):
    out = []
    for _ in range(3):
        p = RNG.normal(size=(8, 4)).astype("float32")
        y = {"binary": RNG.integers(0, 2, (8, 4)), "signs": RNG.choice([-1, 1], (8, 4)),
             "classes": np.eye(4)[RNG.integers(0, 4, 8)]}[kind].astype("float32")
        out.append((y, p, RNG.uniform(0, 2, 8).astype("float32")))
    return out


CASES = [("Hinge", "binary"), ("Hinge", "signs"), ("SquaredHinge", "binary"), ("SquaredHinge", "signs"),
         ("CategoricalHinge", "classes")]


@pytest.mark.parametrize("weighted", [False, True])
@pytest.mark.parametrize("name, kind", CASES)
def test_update_state_then_result_equals_keras(name, kind, weighted):
    ours, theirs = getattr(flow.metrics, name)(), getattr(keras.metrics, name)()
    assert ours._direction == theirs._direction
    for y, p, w in _batches(kind):
        ours.update_state(y, p, sample_weight=w if weighted else None)
        theirs.update_state(y, p, sample_weight=w if weighted else None)
    np.testing.assert_allclose(ours.result(), np.asarray(theirs.result()), rtol=1e-6)
    assert type(ours).from_config(ours.get_config()).get_config() == ours.get_config()


@pytest.mark.parametrize("name, kwargs", [
    ("hinge", {}), ("squared_hinge", {}), ("categorical_hinge", {}), ("huber", {"delta": 0.7}),
    ("binary_focal_crossentropy", {"from_logits": True, "gamma": 1.0}),
    ("categorical_focal_crossentropy", {"from_logits": True})])
def test_functions_equal_keras(name, kwargs):
    y, p, _ = _batches("classes")[0]
    np.testing.assert_allclose(getattr(flow.metrics, name)(y, p, **kwargs),
                               np.asarray(getattr(keras.metrics, name)(y, p, **kwargs)), rtol=2e-6, atol=1e-6)
    assert getattr(flow.metrics, name) is getattr(flow.losses, name)


@pytest.mark.slow
@pytest.mark.parametrize("view", ["mirrored", "consistent"])
def test_in_a_model_evaluate_reports_keras_values(view):
    flow.config.set_view(view)
    flow.config.gpu_device_num(2)
    flow.clear_session()
    x_data = RNG.normal(size=(20, 5)).astype("float32")
    y = np.eye(4, dtype="float32")[RNG.integers(0, 4, 20)]
    x = flow.Input((5,))
    model = flow.Model(x, flow.layers.Dense(4)(x))
    model.compile("sgd", "categorical_hinge", metrics=["hinge", "squared_hinge", "categorical_hinge"])
    logs = model.evaluate(x_data, y, batch_size=10, return_dict=True, verbose=0)
    predictions = model.predict(x_data, batch_size=10, verbose=0)
    for name in ("hinge", "squared_hinge", "categorical_hinge"):
        metric = getattr(keras.metrics, {"hinge": "Hinge", "squared_hinge": "SquaredHinge",
                                         "categorical_hinge": "CategoricalHinge"}[name])()
        for start in (0, 10):
            metric.update_state(y[start:start + 10], predictions[start:start + 10])
        np.testing.assert_allclose(logs[name], float(metric.result()), rtol=1e-6)
