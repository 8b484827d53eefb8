"""Keras 3's losses: each function and class on numpy arrays equals Keras' own (reductions, sample weights,
from_logits, label smoothing, axis), names and aliases resolve as ``keras.losses.get`` resolves them, wrong
arguments are named errors, and a model trained with a loss reaches Keras' weights in both views."""
import os

import numpy as np
import pytest

import flowlayers as flow
from conftest import BACKEND

os.environ.setdefault("KERAS_BACKEND", "jax" if BACKEND == "jax" else "tensorflow")
import keras  # noqa: E402

RNG = np.random.default_rng(7)
SHAPE = (6, 5)


def _inputs(kind):
    """(y_true, y_pred) for a loss family, float32."""
    pred = RNG.normal(size=SHAPE).astype("float32")
    if kind == "probs":
        e = np.exp(pred)
        pred = (e / e.sum(-1, keepdims=True)).astype("float32")
        true = np.eye(SHAPE[1], dtype="float32")[RNG.integers(0, SHAPE[1], SHAPE[0])]
    elif kind == "binary":
        true = RNG.integers(0, 2, SHAPE).astype("float32")
        pred = (1 / (1 + np.exp(-pred))).astype("float32")
    elif kind == "logits":
        true = RNG.integers(0, 2, SHAPE).astype("float32")
    elif kind == "signs":
        true = RNG.choice([-1.0, 1.0], SHAPE).astype("float32")
    elif kind == "positive":
        true, pred = np.abs(RNG.normal(size=SHAPE)).astype("float32"), np.abs(pred) + 0.1
    else:
        true = RNG.normal(size=SHAPE).astype("float32")
    return true, pred.astype("float32")


FUNCTIONS = [   # (name, kwargs, input kind)
    ("mean_squared_error", {}, "real"), ("mean_absolute_error", {}, "real"),
    ("mean_absolute_percentage_error", {}, "real"), ("mean_squared_logarithmic_error", {}, "positive"),
    ("huber", {}, "real"), ("huber", {"delta": 0.3}, "real"), ("log_cosh", {}, "real"),
    ("cosine_similarity", {}, "real"), ("cosine_similarity", {"axis": 0}, "real"),
    ("kl_divergence", {}, "probs"), ("poisson", {}, "positive"),
    ("hinge", {}, "binary"), ("hinge", {}, "signs"), ("squared_hinge", {}, "binary"), ("squared_hinge", {}, "signs"),
    ("categorical_hinge", {}, "probs"),
    ("binary_crossentropy", {}, "binary"), ("binary_crossentropy", {"from_logits": True}, "logits"),
    ("binary_crossentropy", {"label_smoothing": 0.2, "axis": 0}, "binary"),
    ("categorical_crossentropy", {}, "probs"), ("categorical_crossentropy", {"from_logits": True}, "probs"),
    ("categorical_crossentropy", {"label_smoothing": 0.1}, "probs"),
    ("binary_focal_crossentropy", {}, "binary"),
    ("binary_focal_crossentropy", {"apply_class_balancing": True, "alpha": 0.4, "gamma": 1.5, "from_logits": True,
                                   "label_smoothing": 0.1}, "logits"),
    ("categorical_focal_crossentropy", {}, "probs"),
    ("categorical_focal_crossentropy", {"alpha": 0.5, "gamma": 3.0, "from_logits": True, "label_smoothing": 0.2},
     "probs"),
]


@pytest.mark.parametrize("name, kwargs, kind", FUNCTIONS, ids=[f"{n}-{i}" for i, (n, _, _) in enumerate(FUNCTIONS)])
def test_each_function_equals_keras(name, kwargs, kind):
    y_true, y_pred = _inputs(kind)
    got = getattr(flow.losses, name)(y_true, y_pred, **kwargs)
    expected = np.asarray(getattr(keras.losses, name)(y_true, y_pred, **kwargs))
    assert got.shape == expected.shape
    np.testing.assert_allclose(got, expected, rtol=2e-6, atol=2e-6)


def test_sparse_categorical_crossentropy_equals_keras():
    _, probs = _inputs("probs")
    ids = RNG.integers(0, SHAPE[1], SHAPE[0]).astype("int32")
    for kwargs in ({}, {"from_logits": True}):
        np.testing.assert_allclose(flow.losses.sparse_categorical_crossentropy(ids, probs, **kwargs),
                                   keras.losses.sparse_categorical_crossentropy(ids, probs, **kwargs), rtol=2e-6)


CLASSES = [("Huber", {"delta": 0.5}, "real"), ("LogCosh", {}, "real"), ("KLDivergence", {}, "probs"),
           ("Poisson", {}, "positive"), ("Hinge", {}, "binary"), ("SquaredHinge", {}, "signs"),
           ("CategoricalHinge", {}, "probs"), ("CosineSimilarity", {"axis": -1}, "real"),
           ("MeanAbsolutePercentageError", {}, "real"), ("MeanSquaredLogarithmicError", {}, "positive"),
           ("BinaryFocalCrossentropy", {"gamma": 1.0}, "binary"), ("CategoricalFocalCrossentropy", {}, "probs"),
           ("MeanSquaredError", {}, "real"), ("BinaryCrossentropy", {"label_smoothing": 0.1}, "binary"),
           ("CategoricalCrossentropy", {"from_logits": True}, "probs")]


@pytest.mark.parametrize("reduction", ["sum_over_batch_size", "sum", "none", "mean", "mean_with_sample_weight"])
@pytest.mark.parametrize("name, kwargs, kind", CLASSES, ids=[c[0] for c in CLASSES])
def test_each_class_reduces_and_weighs_as_keras(name, kwargs, kind, reduction):
    y_true, y_pred = _inputs(kind)
    weight = RNG.uniform(0, 2, SHAPE[0]).astype("float32")
    ours = getattr(flow.losses, name)(reduction=reduction, **kwargs)
    theirs = getattr(keras.losses, name)(reduction=reduction, **kwargs)
    for w in (None, weight):
        np.testing.assert_allclose(ours(y_true, y_pred, sample_weight=w),
                                   np.asarray(theirs(y_true, y_pred, sample_weight=w)), rtol=3e-6, atol=1e-6)


def test_names_and_aliases_resolve_as_keras():
    for name in ("huber", "Huber", "log_cosh", "LogCosh", "kld", "KLD", "mse", "MSE", "mae", "mape", "msle", "bce",
                 "poisson", "hinge", "squared_hinge", "categorical_hinge", "cosine_similarity", "kl_divergence",
                 "binary_focal_crossentropy", "CategoricalFocalCrossentropy"):
        ours, theirs = flow.losses.get(name), keras.losses.get(name)
        theirs_name = type(theirs).__name__ if isinstance(theirs, keras.losses.Loss) else theirs.__name__
        assert type(ours).fn.__name__ == getattr(keras.losses, theirs_name).__name__ or \
            type(ours).__name__ == theirs_name, (name, ours, theirs)
    assert isinstance(flow.losses.get(flow.losses.huber), flow.losses.Huber)
    assert isinstance(flow.losses.get(flow.losses.Poisson), flow.losses.Poisson)


def test_serialize_round_trips():
    loss = flow.losses.BinaryFocalCrossentropy(apply_class_balancing=True, gamma=3.0, name="focal")
    again = flow.losses.deserialize(flow.losses.serialize(loss))
    assert type(again) is type(loss) and again.get_config() == loss.get_config()
    assert flow.losses.deserialize(flow.losses.serialize(flow.losses.huber)) is flow.losses.huber
    assert flow.losses.get({"class_name": "Huber", "config": {"delta": 2.0}}).delta == 2.0


@pytest.mark.parametrize("make, match", [
    (lambda: flow.losses.Huber(delta=-1), r"Huber: delta expected a number >= 0, received -1"),
    (lambda: flow.losses.LogCosh(reduction="avg"), r"reduction expected one of .*sum_over_batch_size.*'avg'"),
    (lambda: flow.losses.Poisson(dtype="float16"), r"dtype expected None"),
    (lambda: flow.losses.CategoricalFocalCrossentropy(label_smoothing=2), r"label_smoothing expected a value in"),
    (lambda: flow.losses.SparseCategoricalCrossentropy(ignore_class=0), r"ignore_class expected None"),
    (lambda: flow.losses.get("dice"), r"flow\.losses\.dice: Keras 3's keras\.losses\.dice is not in flowlayers"),
    (lambda: flow.losses.get("not_a_loss"), r"loss: expected .* received 'not_a_loss'"),
    (lambda: flow.losses.get(flow.losses.Hinge(reduction="sum")), r"in a model's step, reduction expected"),
    (lambda: flow.losses.deserialize({"class_name": "Huber", "config": {"delta_": 1}}), r"arguments of Huber"),
])
def test_wrong_arguments_are_named_errors(make, match):
    with pytest.raises(flow.ConfigError, match=match):
        make()
