"""A model trained with each family of the new losses reaches Keras 3's weights and loss from the same start, three
SGD steps, with the batch split over two devices in the mirrored and in the consistent view."""
import os

import numpy as np
import pytest

import flowlayers as flow
from conftest import BACKEND

os.environ.setdefault("KERAS_BACKEND", "jax" if BACKEND == "jax" else "tensorflow")
import keras  # noqa: E402

RNG = np.random.default_rng(11)
X = RNG.normal(size=(24, 5)).astype("float32")
LABELS = {
    "real": RNG.normal(size=(24, 3)).astype("float32"),
    "positive": np.abs(RNG.normal(size=(24, 3))).astype("float32"),
    "binary": RNG.integers(0, 2, (24, 3)).astype("float32"),
    "classes": np.eye(3, dtype="float32")[RNG.integers(0, 3, 24)],
}
CASES = [   # loss class, its arguments, the output activation, the labels
    ("Huber", {"delta": 0.5}, None, "real"),
    ("LogCosh", {}, None, "real"),
    ("Poisson", {}, "softplus", "positive"),
    ("Hinge", {}, "tanh", "binary"),
    ("CategoricalHinge", {}, None, "classes"),
    ("BinaryFocalCrossentropy", {"apply_class_balancing": True, "from_logits": True}, None, "binary"),
    ("CategoricalFocalCrossentropy", {}, "softmax", "classes"),
    ("KLDivergence", {}, "softmax", "classes"),
]


def _model(api, activation):
    x = api.Input((5,))
    h = api.layers.Dense(6, activation="tanh")(x)
    return api.Model(x, api.layers.Dense(3, activation=activation)(h))


@pytest.mark.slow
@pytest.mark.parametrize("view", ["mirrored", "consistent"])
@pytest.mark.parametrize("name, kwargs, activation, labels", CASES, ids=[c[0] for c in CASES])
def test_three_steps_reach_keras_weights(name, kwargs, activation, labels, view):
    flow.config.set_view(view)
    flow.config.gpu_device_num(2)
    ours, theirs = _model(flow, activation), _model(keras, activation)
    theirs.set_weights(ours.get_weights())
    y = LABELS[labels]
    ours.compile(flow.optimizers.SGD(0.2), getattr(flow.losses, name)(**kwargs))
    theirs.compile(keras.optimizers.SGD(0.2), getattr(keras.losses, name)(**kwargs))
    got = ours.fit(X, y, batch_size=8, epochs=1, shuffle=False, verbose=0).history["loss"]
    want = theirs.fit(X, y, batch_size=8, epochs=1, shuffle=False, verbose=0).history["loss"]
    np.testing.assert_allclose(got, want, rtol=1e-5)
    for a, b in zip(ours.get_weights(), theirs.get_weights()):
        np.testing.assert_allclose(a, b, atol=2e-6)


def test_compile_by_keras_name_trains():
    flow.config.set_view("mirrored")
    flow.config.gpu_device_num(1)
    model = _model(flow, None)
    model.compile("sgd", loss="huber")
    assert isinstance(model.loss, flow.losses.Huber)
    assert np.isfinite(model.fit(X, LABELS["real"], batch_size=8, verbose=0).history["loss"][0])
