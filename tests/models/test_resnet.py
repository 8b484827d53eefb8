"""A small ResNet (basic blocks with BatchNormalization, a projection shortcut, global average pooling), written
once with Keras' layers: on one device it trains as Keras 3 does from the same weights; in the consistent view on
2 and 4 devices it trains to one device's weights (1e-5).  In the mirrored view each replica normalises by its own
batch (as OneFlow's mirrored view), the documented exception: measured here, and bounded.

The rate is 0.01 with SGD: in float32 a BatchNorm model drifts ~1e-4 at usual rates from merely reordering the
samples of a batch (Keras itself does); at 0.01 for 4 steps that noise stays far below 1e-5."""
import keras
import numpy as np
import pytest

import flowlayers as flow
import places

RNG = np.random.default_rng(8)
X = RNG.normal(size=(32, 8, 8, 3)).astype(np.float32)
Y = RNG.integers(0, 10, 32).astype(np.int32)


def resnet(api):
    L = api.layers

    def block(x, filters, stride, name):
        h = L.Conv2D(filters, 3, strides=stride, padding="same", use_bias=False, name=f"{name}_conv1")(x)
        h = L.Activation("relu")(L.BatchNormalization(name=f"{name}_bn1")(h))
        h = L.BatchNormalization(name=f"{name}_bn2")(L.Conv2D(filters, 3, padding="same", use_bias=False,
                                                              name=f"{name}_conv2")(h))
        if stride != 1 or x.shape[-1] != filters:          # projection shortcut
            x = L.BatchNormalization(name=f"{name}_proj_bn")(L.Conv2D(filters, 1, strides=stride, use_bias=False,
                                                                      name=f"{name}_proj")(x))
        return L.Activation("relu")(L.add([x, h]))

    inputs = api.Input((8, 8, 3))
    h = L.Activation("relu")(L.BatchNormalization(name="stem_bn")(L.Conv2D(8, 3, padding="same", use_bias=False,
                                                                           name="stem")(inputs)))
    h = block(block(h, 8, 1, "b1"), 16, 2, "b2")
    return api.Model(inputs, L.Dense(10, name="head")(L.GlobalAveragePooling2D()(h)))


def fit(model, api):
    model.compile(api.optimizers.SGD(0.01), api.losses.SparseCategoricalCrossentropy(from_logits=True))
    return model.fit(X, Y, batch_size=8, epochs=1, shuffle=False, verbose=0).history["loss"]


def one_device():
    places.consistent(1, seed=4)
    model = resnet(flow)
    start = model.get_weights()
    fit(model, flow)
    return start, model.get_weights()


def test_one_device_trains_as_keras():
    start, ours = one_device()
    theirs = resnet(keras)
    theirs.set_weights(start)
    fit(theirs, keras)
    for a, b in zip(ours, theirs.get_weights()):
        np.testing.assert_allclose(a, b, atol=1e-5)


@pytest.mark.parametrize("devices", [2, 4])
def test_consistent_view_equals_one_device(devices):
    _, want = one_device()
    places.consistent(devices, seed=4)
    model = resnet(flow)
    fit(model, flow)
    for w, a, b in zip(model.weights, model.get_weights(), want):
        np.testing.assert_allclose(a, b, atol=1e-5, err_msg=w.path)


@pytest.mark.parametrize("devices", [2, 4])
def test_mirrored_batch_norm_is_the_measured_exception(devices):
    _, want = one_device()
    flow.config.set_view("mirrored")
    flow.config.gpu_device_num(devices)
    flow.clear_session()
    flow.config.set_seed(4)
    model = resnet(flow)
    fit(model, flow)
    gap = max(float(np.abs(a - b).max()) for a, b in zip(model.get_weights(), want))
    # per-replica batch statistics (2 or 4 samples of 8): weights part by ~1e-3 here after 4 steps, not by 1e-5
    assert 1e-5 < gap < 2e-2, gap
