"""Bidirectional against Keras 3's: the forward and backward copies (names, weights in Keras' order and shapes),
every merge mode, a given backward layer, initial and returned states, masks from ``Embedding(mask_zero=True)``,
outputs and one SGD step, on one device, 2 replicas, 2 devices and a 2x2 mesh; configs and mistakes."""
import json

import keras
import numpy as np
import pytest

import flowlayers as flow
from rnn_reference import BATCH, EVERY_PLACE, FEATURES, TIME, UNITS, keras_weights, padded_ids, same_step, use


@pytest.mark.parametrize("place", EVERY_PLACE)
@pytest.mark.parametrize("merge_mode", ["concat", "sum", "mul", "ave", None])
def test_merges_compute_and_train_as_keras(merge_mode, place):
    use(place)
    rng = np.random.default_rng(0)

    def model(api):
        x = api.Input((TIME, FEATURES))
        layer = api.layers.Bidirectional(api.layers.LSTM(UNITS, return_sequences=True, name="seq"),
                                         merge_mode=merge_mode, name="bi")
        y = layer(x)
        return api.Model(x, api.layers.Concatenate()(y) if merge_mode is None else y), layer

    (ours, layer), (theirs, their_layer) = model(flow), model(keras)
    assert (layer.forward_layer.name, layer.backward_layer.name) == ("forward_seq", "backward_seq")
    assert [(w.path, w.shape) for w in layer.weights] == [
        (w.path.removeprefix("bi/"), tuple(w.shape)) for w in their_layer.weights]
    ours.set_weights(keras_weights(theirs, rng))
    x = rng.normal(size=(BATCH, TIME, FEATURES)).astype(np.float32)
    same_step(ours, theirs, x, rng.normal(size=ours.predict(x, verbose=0).shape).astype(np.float32))


@pytest.mark.parametrize("place", EVERY_PLACE)
def test_a_given_backward_layer_and_states_are_keras(place):
    """A GRU forwards and a GRU of another reset_after backwards; their initial states given, their last returned."""
    use(place)
    rng = np.random.default_rng(1)

    def model(api):
        x, h_f, h_b = api.Input((TIME, FEATURES)), api.Input((UNITS,)), api.Input((UNITS,))
        layer = api.layers.Bidirectional(api.layers.GRU(UNITS, return_state=True), merge_mode="sum",
                                         backward_layer=api.layers.GRU(UNITS, go_backwards=True, reset_after=False,
                                                                       return_state=True))
        y, s_f, s_b = layer(x, initial_state=[h_f, h_b])
        return api.Model([x, h_f, h_b], api.layers.Concatenate()([y, s_f, s_b]))

    ours, theirs = model(flow), model(keras)
    ours.set_weights(keras_weights(theirs, rng))
    inputs = [rng.normal(size=(BATCH,) + s).astype(np.float32) for s in ((TIME, FEATURES), (UNITS,), (UNITS,))]
    same_step(ours, theirs, inputs, rng.normal(size=(BATCH, 3 * UNITS)).astype(np.float32))


@pytest.mark.parametrize("place", EVERY_PLACE)
def test_a_mask_zero_embedding_masks_both_directions_as_keras(place):
    use(place)
    rng = np.random.default_rng(2)

    def model(api):
        ids = api.Input((TIME,), dtype="int32")
        h = api.layers.Embedding(12, FEATURES, mask_zero=True)(ids)
        return api.Model(ids, api.layers.Dense(2)(api.layers.Bidirectional(api.layers.SimpleRNN(UNITS))(h)))

    ours, theirs = model(flow), model(keras)
    ours.set_weights(keras_weights(theirs, rng))
    same_step(ours, theirs, padded_ids(rng), rng.normal(size=(BATCH, 2)).astype(np.float32))


def test_masked_sequences_give_zeros_at_masked_steps_as_keras():
    """With ``return_sequences`` both directions output zeros at masked steps (Keras forces
    ``zero_output_for_mask``), the backward one merged in the input's order."""
    use("1")
    rng = np.random.default_rng(3)

    def model(api):
        ids = api.Input((TIME,), dtype="int32")
        h = api.layers.Embedding(12, FEATURES, mask_zero=True)(ids)
        return api.Model(ids, api.layers.Bidirectional(api.layers.LSTM(UNITS, return_sequences=True))(h))

    ours, theirs = model(flow), model(keras)
    ours.set_weights(keras_weights(theirs, rng))
    ids = padded_ids(rng)
    out = ours.predict(ids, verbose=0)
    np.testing.assert_allclose(out, theirs.predict(ids, verbose=0), atol=1e-5)
    np.testing.assert_array_equal(out[ids == 0], 0.0)


def test_config_round_trips_and_a_saved_model_loads(tmp_path):
    use("1")
    layer = flow.layers.Bidirectional(flow.layers.GRU(UNITS, return_sequences=True, dropout=0.1), merge_mode="ave",
                                      backward_layer=flow.layers.GRU(UNITS, return_sequences=True, go_backwards=True,
                                                                     activation="relu"))
    config = json.loads(json.dumps(layer.get_config()))
    again = flow.layers.Bidirectional.from_config(dict(config))
    assert json.loads(json.dumps(again.get_config())) == config
    assert config["backward_layer"]["config"]["activation"] == "relu"
    x = flow.Input((TIME, FEATURES))
    model = flow.Model(x, layer(x))
    model.save(tmp_path / "m")
    inputs = np.random.default_rng(4).normal(size=(BATCH, TIME, FEATURES)).astype(np.float32)
    np.testing.assert_array_equal(model.predict(inputs, verbose=0),
                                  flow.models.load_model(tmp_path / "m").predict(inputs, verbose=0))


def test_freezing_freezes_both_directions():
    layer = flow.layers.Bidirectional(flow.layers.SimpleRNN(UNITS), trainable=False)
    x = flow.Input((TIME, FEATURES))
    layer(x)
    assert len(layer.weights) == 6 and layer.trainable_weights == []
    layer.trainable = True
    assert len(layer.trainable_weights) == 6


@pytest.mark.parametrize("make, message", [
    (lambda: flow.layers.Bidirectional(flow.layers.Dense(3)), r"layer expected a SimpleRNN, LSTM or GRU layer"),
    (lambda: flow.layers.Bidirectional(flow.layers.LSTM(3), merge_mode="max"),
     r"merge_mode expected one of \['concat', 'sum', 'mul', 'ave', None\], received 'max'"),
    (lambda: flow.layers.Bidirectional(flow.layers.LSTM(3), weights=[np.zeros(3)]), r"weights is not supported"),
    (lambda: flow.layers.Bidirectional(flow.layers.LSTM(3), backward_layer=flow.layers.LSTM(3)),
     r"different go_backwards, received go_backwards=False for both"),
    (lambda: flow.layers.Bidirectional(flow.layers.LSTM(3), backward_layer=flow.layers.LSTM(
        3, go_backwards=True, return_sequences=True)), r"one return_sequences, received False and True"),
    (lambda: flow.layers.Bidirectional(flow.layers.LSTM(3))(flow.Input((TIME, FEATURES)),
                                                             initial_state=[flow.Input((3,))]),
     r"initial_state expected 4 Blobs"),
])
def test_mistakes_are_named(make, message):
    with pytest.raises(flow.FlowLayersError, match=message):
        make()
