"""Normalization (given statistics, or ``adapt`` on numpy data and on an iterable of batches), Discretization
(given boundaries, or ``adapt``) and CategoryEncoding against Keras 3's: the same statistics and boundaries from
the same data, the same outputs in every output mode, on one device, two mirrored replicas and a 2x2 mesh."""
import keras
import numpy as np
import pytest

import flowlayers as flow
from keras_reference import BATCH, PLACES, use

RNG = np.random.default_rng(0)
TRAIN = RNG.normal(2.0, 3.0, (40, 5, 3)).astype(np.float32)
X = RNG.normal(2.0, 3.0, (BATCH, 5, 3)).astype(np.float32)


def outputs_equal(make, x, adapt=None, atol=1e-5, dtype="float32"):
    """``make(api)``'s layer, adapted on ``adapt`` where given, gives Keras' outputs for ``x`` in every place."""
    theirs_layer = make(keras)
    if adapt is not None:
        theirs_layer.adapt(adapt)
    inp = keras.Input(x.shape[1:], dtype=dtype)
    want = keras.Model(inp, theirs_layer(inp)).predict(x, verbose=0)
    for place in PLACES:
        use(place)
        layer = make(flow)
        if adapt is not None:
            layer.adapt(adapt)
        inp = flow.Input(x.shape[1:], dtype=dtype)
        got = flow.Model(inp, layer(inp)).predict(x, verbose=0)
        assert got.dtype == want.dtype, (got.dtype, want.dtype)
        np.testing.assert_allclose(got, want, atol=atol, rtol=atol, err_msg=place)
    return layer, theirs_layer


@pytest.mark.parametrize("kwargs", [{}, {"axis": (1, 2)}, {"axis": None}, {"invert": True}])
def test_normalization_adapts_to_keras_statistics(kwargs):
    ours, theirs = outputs_equal(lambda api: api.layers.Normalization(**kwargs), X, adapt=TRAIN)
    for a, b in zip(ours.get_weights(), theirs.get_weights()[:2]):
        np.testing.assert_allclose(a, b, rtol=1e-6)


def test_normalization_adapts_to_batches_as_keras():
    batches = [TRAIN[:16], TRAIN[16:24], TRAIN[24:]]
    ours, theirs = outputs_equal(lambda api: api.layers.Normalization(), X, adapt=batches)
    for a, b in zip(ours.get_weights(), theirs.get_weights()[:2]):
        np.testing.assert_allclose(a, b, rtol=1e-5)
    np.testing.assert_allclose(ours.get_weights()[0], TRAIN.reshape(-1, 3).mean(0), rtol=1e-5)


@pytest.mark.parametrize("kwargs", [{"mean": [0.5, 1.0, -1.0], "variance": [2.0, 0.5, 1.0]},
                                    {"axis": (1, 2), "mean": 0.5, "variance": 2.0, "invert": True},
                                    {"axis": (1, 2), "mean": [1.0, 2.0, 3.0], "variance": [1.0, 4.0, 9.0]}])
def test_normalization_with_given_statistics_is_keras(kwargs):
    layer, _ = outputs_equal(lambda api: api.layers.Normalization(**kwargs), X)
    assert layer.weights == []


def test_normalization_saves_adapted_statistics(tmp_path):
    layer = flow.layers.Normalization()
    layer.adapt(TRAIN)
    x = flow.Input((5, 3))
    model = flow.Model(x, layer(x))
    model.save(tmp_path / "m.keras")
    np.testing.assert_array_equal(flow.models.load_model(tmp_path / "m.keras").predict(X, verbose=0),
                                  model.predict(X, verbose=0))


@pytest.mark.parametrize("mode", ["int", "one_hot", "multi_hot", "count"])
def test_discretization_with_boundaries_is_keras(mode):
    x = np.round(X, 1)      # some values on a boundary
    outputs_equal(lambda api: api.layers.Discretization(bin_boundaries=[-1.0, 0.0, 2.0, 2.5], output_mode=mode),
                  x[:, :, :1] if mode == "one_hot" else x[:, 0])


@pytest.mark.parametrize("num_bins, values", [(4, 60), (5, 100), (3, 7), (8, 5)])
def test_discretization_adapts_to_keras_boundaries(num_bins, values):
    """Keras' quantile sketch is exact up to 1 / epsilon values (100 by default): the same boundaries there."""
    data = RNG.normal(size=(values, 1)).astype(np.float32)
    ours, theirs = outputs_equal(lambda api: api.layers.Discretization(num_bins=num_bins), X[:, :, 0], adapt=data)
    np.testing.assert_allclose(ours.bin_boundaries, theirs.bin_boundaries, rtol=1e-5, atol=1e-6)


def test_discretization_adapts_to_quantiles_within_epsilon_on_more_data():
    data = RNG.normal(size=(5000,)).astype(np.float32)
    ours, theirs = flow.layers.Discretization(num_bins=10), keras.layers.Discretization(num_bins=10)
    ours.adapt(data)
    theirs.adapt(data)
    ranks = lambda bounds: np.searchsorted(np.sort(data), bounds) / data.size   # noqa: E731
    np.testing.assert_allclose(ranks(ours.bin_boundaries), np.arange(1, 10) / 10, atol=1e-3)
    np.testing.assert_allclose(ranks(theirs.bin_boundaries), ranks(ours.bin_boundaries), atol=0.01)


@pytest.mark.parametrize("mode, shape", [("one_hot", (1,)), ("one_hot", (3,)), ("multi_hot", (4,)),
                                         ("count", (4,))])
def test_category_encoding_is_keras(mode, shape):
    tokens = RNG.integers(0, 6, (BATCH,) + shape).astype(np.int32)
    outputs_equal(lambda api: api.layers.CategoryEncoding(6, output_mode=mode), tokens, dtype="int32")


@pytest.mark.parametrize("make, message", [
    (lambda: flow.layers.Normalization(mean=[1.0]), r"expected mean and variance both given, of one shape, or "
                                                    r"neither"),
    (lambda: flow.layers.Normalization(mean=1.0, variance=1.0).adapt(TRAIN), r"the layer was made with a mean and "
                                                                             r"variance"),
    (lambda: flow.layers.Normalization().adapt("data"), r"expected a numpy array or an iterable of them, received "
                                                        r"str"),
    (lambda: flow.layers.Discretization(), r"expected either bin_boundaries or num_bins"),
    (lambda: flow.layers.Discretization(bin_boundaries=[1.0]).adapt(TRAIN), r"the layer was made with "
                                                                            r"bin_boundaries"),
    (lambda: flow.layers.Discretization(num_bins=3, sparse=True), r"sparse=True is not supported"),
    (lambda: flow.layers.CategoryEncoding(0), r"num_tokens expected a positive int, received 0"),
    (lambda: flow.layers.CategoryEncoding(4, output_mode="tf_idf"), r"output_mode expected one of"),
])
def test_mistakes_are_named(make, message):
    with pytest.raises(flow.FlowLayersError, match=message):
        make()
