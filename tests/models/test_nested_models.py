"""A model is a layer, as in Keras: called on Blobs inside another model (its weights shared, also when called
twice), frozen with ``trainable = False`` for transfer learning, and called on arrays for its outputs.  Checked
against Keras 3 doing the same from the same weights, and in both views against one device."""
import keras
import numpy as np
import pytest

import flowlayers as flow


def siamese(api):
    """An encoder used twice (shared weights) and a head on the difference of the two encodings."""
    L = api.layers
    x = api.Input((6,))
    encoder = api.Model(x, L.Dense(4, activation="tanh")(L.Dense(8, activation="relu")(x)), name="encoder")
    a, b = api.Input((6,)), api.Input((6,))
    diff = L.subtract([encoder(a), encoder(b)])
    return encoder, api.Model([a, b], L.Dense(1)(diff))


def data():
    rng = np.random.default_rng(5)
    return [rng.standard_normal((16, 6)).astype(np.float32) for _ in range(2)], \
        rng.standard_normal((16, 1)).astype(np.float32)


def test_a_shared_encoder_trains_as_in_keras():
    flow.clear_session()
    encoder, ours = siamese(flow)
    k_encoder, theirs = siamese(keras)
    assert len(ours.weights) == len(theirs.weights) == 6           # the encoder's weights counted once
    theirs.set_weights(ours.get_weights())
    ours.compile(flow.optimizers.SGD(0.1), "mse")
    theirs.compile(keras.optimizers.SGD(0.1), "mse")
    x, y = data()
    for _ in range(3):
        np.testing.assert_allclose(ours.train_on_batch(x, y), theirs.train_on_batch(x, y), rtol=1e-5)
    for a, b in zip(ours.get_weights(), theirs.get_weights()):
        np.testing.assert_allclose(a, b, atol=1e-6)
    for a, b in zip(encoder.get_weights(), ours.get_weights()[:4]):   # the inner model holds the trained weights
        np.testing.assert_array_equal(a, b)
    np.testing.assert_allclose(encoder(x[0]), k_encoder.predict(x[0], verbose=0), atol=1e-6)   # called on arrays


@pytest.mark.parametrize("view, n", [("consistent", 2), ("mirrored", 2)])
def test_nested_models_train_to_one_device_weights(view, n):
    x, y = data()
    results = []
    for v, d in (("mirrored", 1), (view, n)):
        flow.config.set_view(v)
        flow.config.gpu_device_num(d)
        flow.clear_session()
        flow.config.set_seed(1)
        _, model = siamese(flow)
        model.compile(flow.optimizers.Adam(0.01), "mse")
        model.fit(x, y, batch_size=8, epochs=2, shuffle=False, verbose=0)
        results.append(model.get_weights())
    for a, b in zip(*results):
        np.testing.assert_allclose(b, a, atol=1e-5)


@pytest.mark.parametrize("view, n", [("mirrored", 1), ("mirrored", 2), ("consistent", 2)])
def test_transfer_learning_freezes_the_base_until_unfrozen(view, n):
    flow.config.set_view(view)
    flow.config.gpu_device_num(n)
    flow.clear_session()
    inp = flow.Input((6,))
    base = flow.Model(inp, flow.layers.BatchNormalization(name="bn")(flow.layers.Dense(8, name="feature")(inp)),
                      name="base")
    x, y = data()
    new_in = flow.Input((6,))
    model = flow.Model(new_in, flow.layers.Dense(1, name="head")(base(new_in, training=False)))
    base.trainable = False
    assert not base.trainable and [w.path for w in model.trainable_weights] == ["head/kernel", "head/bias"]
    model.compile(flow.optimizers.SGD(0.1), "mse")
    frozen = base.get_weights()
    model.fit(x[0], y, batch_size=8, verbose=0)
    for a, b in zip(base.get_weights(), frozen):            # kernels and the moving statistics (training=False)
        np.testing.assert_array_equal(a, b)
    base.trainable = True                                    # fine-tuning: the next fit trains it again
    assert [w.path for w in model.trainable_weights] == ["feature/kernel", "feature/bias", "bn/gamma", "bn/beta",
                                                         "head/kernel", "head/bias"]
    model.fit(x[0], y, batch_size=8, verbose=0)
    assert not np.array_equal(base.get_weights()[0], frozen[0])
    np.testing.assert_array_equal(base.get_weights()[4], frozen[4])     # moving mean: still inference mode


@pytest.mark.parametrize("call, error, message", [
    (lambda m, a, b: m([a, b]), flow.GraphError, r"expected 1 input Blob\(s\) \['input'\], received 2"),
    (lambda m, a, b: m(flow.Input((5,))), flow.ShapeError, r"input 'input' expected a Blob of shape \(None, 6\)"),
    (lambda m, a, b: m({"image": a}), flow.GraphError, r"expected Blobs for the inputs \['input'\], received them "
                                                       r"for \['image'\]"),
])
def test_calling_a_model_wrongly_is_named(call, error, message):
    flow.clear_session()
    x = flow.Input((6,))
    model = flow.Model(x, flow.layers.Dense(2)(x))
    with pytest.raises(error, match=message):
        call(model, flow.Input((6,)), flow.Input((6,)))
    assert model(np.ones((3, 6), np.float32)).shape == (3, 2)         # the model is unchanged and usable
