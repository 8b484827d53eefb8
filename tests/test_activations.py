"""Keras 3's activations: each function equals Keras' on numpy arrays (Keras' signatures and defaults) and inside
a Dense layer equals Keras' Dense with the same weights; names, serialize and deserialize as Keras'."""
import inspect
import os

import numpy as np
import pytest

import flowlayers as flow
from conftest import BACKEND

os.environ.setdefault("KERAS_BACKEND", "jax" if BACKEND == "jax" else "tensorflow")
import keras  # noqa: E402

RNG = np.random.default_rng(5)
X = (RNG.normal(size=(4, 6)) * 2).astype("float32")
X[0, :4] = [-1.0, 1.0, 0.5, -0.5]       # the kinks of sparse_plus, sparse_sigmoid and the shrinks

CASES = [   # (name, kwargs)
    ("relu", {}), ("relu", {"negative_slope": 0.1}), ("relu", {"max_value": 1.5}), ("relu", {"threshold": 0.3}),
    ("relu", {"negative_slope": 0.2, "max_value": 2.0, "threshold": 0.5}), ("relu", {"max_value": 6.0}),
    ("sigmoid", {}), ("tanh", {}), ("softmax", {}), ("softmax", {"axis": 0}), ("gelu", {}),
    ("gelu", {"approximate": True}), ("elu", {}), ("elu", {"alpha": 0.5}), ("selu", {}), ("silu", {}),
    ("swish", {}), ("softplus", {}), ("softsign", {}), ("leaky_relu", {}), ("leaky_relu", {"negative_slope": 0.05}),
    ("relu6", {}), ("hard_sigmoid", {}), ("hard_silu", {}), ("hard_swish", {}), ("exponential", {}),
    ("linear", {}), ("log_softmax", {}), ("log_softmax", {"axis": 0}), ("mish", {}), ("log_sigmoid", {}),
    ("celu", {}), ("celu", {"alpha": 2.0}), ("glu", {}), ("hard_tanh", {}), ("hard_shrink", {}),
    ("hard_shrink", {"threshold": 1.0}), ("soft_shrink", {}), ("soft_shrink", {"threshold": 0.2}),
    ("tanh_shrink", {}), ("squareplus", {}), ("squareplus", {"b": 1}), ("sparse_plus", {}),
    ("sparse_sigmoid", {}), ("sparsemax", {}), ("sparsemax", {"axis": 0}),
    ("threshold", {"threshold": 0.2, "default_value": -1.0}),
]
IDS = [f"{n}-{i}" for i, (n, _) in enumerate(CASES)]


def test_keras_signatures_and_names():
    names = [n for n in dir(keras.activations) if not n.startswith("_")]
    for name in names:
        ours, theirs = getattr(flow.activations, name), getattr(keras.activations, name)
        keras_params = list(inspect.signature(theirs).parameters.items())     # ``get`` also takes ``what``
        assert list(inspect.signature(ours).parameters.items())[:len(keras_params)] == keras_params, name


@pytest.mark.parametrize("name, kwargs", CASES, ids=IDS)
def test_each_activation_equals_keras_on_arrays(name, kwargs):
    got = getattr(flow.activations, name)(X, **kwargs)
    expected = np.asarray(getattr(keras.activations, name)(X, **kwargs))
    assert got.shape == expected.shape and got.dtype == expected.dtype
    np.testing.assert_allclose(got, expected, rtol=2e-6, atol=1e-6)


# by name (Keras' defaults), and a few with arguments; glu halves the units, so it is left to the array test
DENSE = [c for c in CASES if c[0] != "glu" and not c[1]] + [
    ("relu", {"negative_slope": 0.2, "max_value": 2.0, "threshold": 0.5}), ("gelu", {"approximate": True}),
    ("soft_shrink", {"threshold": 0.2})]


@pytest.mark.parametrize("name, kwargs", DENSE, ids=[f"{n}-{i}" for i, (n, _) in enumerate(DENSE)])
def test_inside_a_dense_layer_equals_keras(name, kwargs):
    flow.config.set_view("mirrored")
    flow.config.gpu_device_num(1)
    out = []
    for api in (flow, keras):
        fn = getattr(api.activations, name)
        x = api.Input((6,))
        layer = api.layers.Dense(5, activation=(lambda t, fn=fn: fn(t, **kwargs)) if kwargs else name)
        out.append((api.Model(x, layer(x)), layer))
    out[0][1].set_weights(out[1][1].get_weights())
    np.testing.assert_allclose(out[0][0].predict(X, verbose=0), out[1][0].predict(X, verbose=0), rtol=2e-6,
                               atol=2e-6)


def test_get_serialize_deserialize():
    assert flow.activations.get(None) is flow.activations.linear
    assert flow.activations.get("gelu") is flow.activations.gelu
    assert flow.activations.get(flow.activations.mish) is flow.activations.mish
    assert flow.activations.serialize(flow.activations.swish) == keras.activations.serialize(keras.activations.swish)
    assert flow.activations.deserialize("hard_tanh") is flow.activations.hard_tanh
    assert flow.layers.Dense(3, activation=flow.activations.gelu).get_config()["activation"] == "gelu"
    with pytest.raises(flow.LayerError, match=r"activations.deserialize: expected one of .* received 'nope'"):
        flow.activations.deserialize("nope")
    with pytest.raises(flow.LayerError, match=r"activation: expected a callable or one of .* received 'nope'"):
        flow.activations.get("nope")
    with pytest.raises(flow.LayerError, match=r"squareplus: b expected a number >= 0, received -1"):
        flow.activations.squareplus(X, b=-1)
