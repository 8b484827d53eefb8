"""Any batch size from 1 up works in every view and equals one device, also batches smaller than the device
count (some devices then get no rows): predict, evaluate, and fit whose last batch has a single row."""
import numpy as np
import pytest

import flowlayers as flow

PLACES = [("mirrored", 2), ("mirrored", 4), ("consistent", 2), ("consistent", 4)]


def conv_model():
    flow.clear_session()
    flow.config.set_seed(4)
    x = flow.Input((1, 8, 8))
    h = flow.layers.Conv2D(4, 3, padding="same", activation="relu", data_format="channels_first")(x)
    h = flow.layers.MaxPool2D(2, data_format="channels_first")(h)
    model = flow.Model(x, flow.layers.Dense(10)(flow.layers.Flatten()(h)))
    model.compile(optimizer=flow.optimizers.SGD(0.1, momentum=0.9),
                  loss=flow.losses.SparseCategoricalCrossentropy(from_logits=True), metrics=["accuracy"])
    return model


@pytest.fixture(scope="module")
def digits():
    (x, y), _ = flow.data.load_digits()
    return x[:9], y[:9]


def run(view, n, x, y):
    flow.config.set_view(view)
    flow.config.gpu_device_num(n)
    model = conv_model()
    out = {"predict": [model.predict(x[:k], batch_size=k, verbose=0) for k in (1, 2, 3, 5)],
           "evaluate": [model.evaluate(x[:k], y[:k], batch_size=k, verbose=0) for k in (1, 3)]}
    model.fit(x, y, batch_size=4, epochs=2, shuffle=False, verbose=0)       # 4, 4, then a batch of 1
    out["weights"] = model.get_weights()
    out["after"] = model.predict(x[:1], verbose=0)
    return out


@pytest.mark.parametrize("view, n", PLACES, ids=[f"{v}{n}" for v, n in PLACES])
def test_batches_smaller_than_the_device_count_equal_one_device(view, n, digits):
    ref, got = run("mirrored", 1, *digits), run(view, n, *digits)
    for k, (a, b) in enumerate(zip(ref["predict"], got["predict"])):
        assert a.shape == b.shape
        np.testing.assert_allclose(b, a, atol=1e-5, err_msg=f"predict, batch {k}")
    for a, b in zip(ref["evaluate"], got["evaluate"]):
        np.testing.assert_allclose(b, a, atol=1e-5)
    assert max(float(np.abs(a - b).max()) for a, b in zip(ref["weights"], got["weights"])) < 1e-5
    np.testing.assert_allclose(got["after"], ref["after"], atol=1e-5)
