"""The layers Keras guides use most, in a model as a guide would write it: the same predictions as Keras 3 from
the same weights, and in every view and device count the weights of one device after training."""
import keras
import numpy as np
import pytest

import flowlayers as flow

PLACES = [("mirrored", 2), ("mirrored", 4), ("consistent", 2), ("consistent", 4)]


def build(api):
    """One model, written once for both APIs (flowlayers' and Keras' names and arguments are the same)."""
    L = api.layers
    image = api.Input((8, 8, 1))
    x = L.Rescaling(1 / 16.0, offset=-0.25)(image)
    x = L.ZeroPadding2D(((1, 0), (0, 1)))(x)
    x = L.Conv2D(4, 3, activation="relu")(x)
    x = L.UpSampling2D((2, 1))(x)
    x = L.Conv2DTranspose(3, 3, strides=2, padding="same", activation="relu")(x)
    pooled = L.GlobalAveragePooling2D()(x)
    peak = L.GlobalMaxPooling2D()(x)
    mixed = L.add([L.multiply([pooled, peak]), L.subtract([peak, pooled]), L.Average()([pooled, peak])])
    seq = L.Reshape((8, 8))(image)
    seq = L.Conv1D(3, 3, padding="causal", activation="relu")(seq)
    seq = L.Conv1D(2, 2, strides=2)(seq)
    joined = L.concatenate([mixed, L.Flatten()(seq)])
    return api.Model(image, L.Dense(10)(joined))


@pytest.fixture(scope="module")
def digits():
    (x, y), _ = flow.data.load_digits(image_format="NHWC")
    return (x[:96] * 16.0).astype(np.float32), y[:96]


def flow_model(view, n):
    flow.config.set_view(view)
    flow.config.gpu_device_num(n)
    flow.clear_session()
    flow.config.set_seed(7)
    model = build(flow)
    model.compile(flow.optimizers.Adam(0.01), flow.losses.SparseCategoricalCrossentropy(from_logits=True))
    return model


def test_predictions_match_keras(digits):
    ours = flow_model("mirrored", 1)
    theirs = build(keras)
    assert [w.shape for w in theirs.get_weights()] == [w.shape for w in ours.get_weights()]
    theirs.set_weights(ours.get_weights())
    x = digits[0][:16]
    np.testing.assert_allclose(ours.predict(x, verbose=0), theirs.predict(x, verbose=0), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("view, n", PLACES, ids=[f"{v}{n}" for v, n in PLACES])
def test_training_equals_one_device(view, n, digits):
    reference = flow_model("mirrored", 1)
    reference.fit(*digits, batch_size=32, epochs=1, shuffle=False, verbose=0)
    model = flow_model(view, n)
    model.fit(*digits, batch_size=32, epochs=1, shuffle=False, verbose=0)
    for a, b in zip(reference.get_weights(), model.get_weights()):
        np.testing.assert_allclose(b, a, atol=1e-5)
