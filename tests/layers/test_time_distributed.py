"""TimeDistributed against Keras 3's: a Dense and a Conv2D on every time step, and a Dense after an LSTM's sequence,
outputs and one SGD step alike, on one device, 2 replicas, 2 devices and a 2x2 mesh; configs, a saved model,
mistakes."""
import json

import keras
import numpy as np
import pytest

import flowlayers as flow
from rnn_reference import BATCH, EVERY_PLACE, FEATURES, TIME, UNITS, keras_weights, same_step, use


@pytest.mark.parametrize("place", EVERY_PLACE)
def test_a_dense_after_an_lstm_computes_and_trains_as_keras(place):
    use(place)
    rng = np.random.default_rng(0)

    def model(api):
        x = api.Input((TIME, FEATURES))
        h = api.layers.LSTM(UNITS, return_sequences=True)(x)
        layer = api.layers.TimeDistributed(api.layers.Dense(2, activation="tanh", name="per_step"))
        return api.Model(x, layer(h)), layer

    (ours, layer), (theirs, their_layer) = model(flow), model(keras)
    assert [(w.path, w.shape) for w in layer.weights] == [
        (w.path.removeprefix(f"{their_layer.name}/"), tuple(w.shape)) for w in their_layer.weights]
    ours.set_weights(keras_weights(theirs, rng))
    x = rng.normal(size=(BATCH, TIME, FEATURES)).astype(np.float32)
    same_step(ours, theirs, x, rng.normal(size=(BATCH, TIME, 2)).astype(np.float32))


@pytest.mark.parametrize("place", ["1", "mirrored2"])
def test_a_convolution_on_every_frame_is_keras(place):
    use(place)
    rng = np.random.default_rng(1)

    def model(api):
        frames = api.Input((3, 6, 6, 2))
        return api.Model(frames, api.layers.TimeDistributed(api.layers.Conv2D(4, 3, activation="relu"))(frames))

    ours, theirs = model(flow), model(keras)
    ours.set_weights(keras_weights(theirs, rng))
    x = rng.normal(size=(BATCH, 3, 6, 6, 2)).astype(np.float32)
    same_step(ours, theirs, x, rng.normal(size=(BATCH, 3, 4, 4, 4)).astype(np.float32))


def test_config_round_trips_and_a_saved_model_loads(tmp_path):
    use("1")
    layer = flow.layers.TimeDistributed(flow.layers.Dense(3, use_bias=False, kernel_initializer="he_normal"))
    config = json.loads(json.dumps(layer.get_config()))
    assert json.loads(json.dumps(flow.layers.TimeDistributed.from_config(dict(config)).get_config())) == config
    x = flow.Input((TIME, FEATURES))
    model = flow.Model(x, layer(x))
    model.save(tmp_path / "m")
    inputs = np.random.default_rng(2).normal(size=(BATCH, TIME, FEATURES)).astype(np.float32)
    np.testing.assert_array_equal(model.predict(inputs, verbose=0),
                                  flow.models.load_model(tmp_path / "m").predict(inputs, verbose=0))


def test_freezing_freezes_the_layer():
    layer = flow.layers.TimeDistributed(flow.layers.Dense(3), trainable=False)
    layer(flow.Input((TIME, FEATURES)))
    assert len(layer.weights) == 2 and layer.trainable_weights == []


@pytest.mark.parametrize("make, message", [
    (lambda: flow.layers.TimeDistributed("dense"), r"layer expected a flowlayers layer, received 'dense'"),
    (lambda: flow.layers.TimeDistributed(flow.layers.Dense(3))(flow.Input((FEATURES,))),
     r"expected one input of shape \(batch, time, ...\) with a known number of time steps, received \(None, 3\)"),
    (lambda: flow.layers.TimeDistributed(flow.layers.Dense(3))(flow.Input((None, FEATURES))),
     r"known number of time steps, received \(None, None, 3\)"),
    (lambda: flow.layers.TimeDistributed.from_config({"layer": {"class_name": "Evil", "module": "os",
                                                                "config": {}}}),
     r"expected a saved flowlayers layer, received class 'Evil' of module 'os'"),
])
def test_mistakes_are_named(make, message):
    with pytest.raises(flow.FlowLayersError, match=message):
        make()
