"""Models with several outputs, compiled as Keras 3 compiles them: a loss (and loss weight, metrics) per output
by list or by output name, labels by list or dict.  Checked against Keras 3 from the same weights: the weights
after training, the total loss, every validation and evaluate number, the History keys.  (Keras' own training
values of each output's loss do not add up to its total with the loss weights; flowlayers' do, and that is what
is checked for them.)"""
import keras
import numpy as np
import pytest

import flowlayers as flow


def two_heads(api):
    x = api.Input((4,), name="x")
    h = api.layers.Dense(5, activation="relu", name="h")(x)
    return api.Model(x, [api.layers.Dense(3, activation="softmax", name="cls")(h), api.layers.Dense(1, name="reg")(h)])


def data():
    rng = np.random.default_rng(0)
    return rng.random((24, 4)).astype(np.float32), rng.integers(0, 3, 24), rng.random((24, 1)).astype(np.float32)


COMPILES = {
    "dicts": ({"loss": {"cls": "sparse_categorical_crossentropy", "reg": "mse"}, "loss_weights": {"cls": 2.0, "reg": 0.5},
               "metrics": {"cls": ["acc"]}}, lambda a, b: {"cls": a, "reg": b}),
    "lists": ({"loss": ["sparse_categorical_crossentropy", "mse"], "loss_weights": [1.0, 3.0],
               "metrics": [["accuracy"], []]}, lambda a, b: [a, b]),
}


@pytest.mark.parametrize("view, n", [("mirrored", 1), ("mirrored", 2), ("consistent", 2)])
@pytest.mark.parametrize("style", sorted(COMPILES))
def test_multi_output_training_matches_keras(style, view, n):
    flow.config.set_view(view)
    flow.config.gpu_device_num(n)
    flow.clear_session()
    kwargs, labels = COMPILES[style]
    ours, theirs = two_heads(flow), two_heads(keras)
    theirs.set_weights(ours.get_weights())
    ours.compile(flow.optimizers.SGD(0.1), **kwargs)
    theirs.compile(keras.optimizers.SGD(0.1), **kwargs)
    x, ya, yb = data()
    fit = dict(batch_size=8, epochs=2, shuffle=False, verbose=0, validation_split=0.25)
    got, want = ours.fit(x, labels(ya, yb), **fit).history, theirs.fit(x, labels(ya, yb), **fit).history
    assert sorted(got) == sorted(want)
    for key in want:
        if key.startswith("val_") or key == "loss" or not key.endswith("_loss"):
            np.testing.assert_allclose(got[key], want[key], rtol=1e-5, atol=1e-6, err_msg=key)
    weights = kwargs["loss_weights"]
    w = [weights["cls"], weights["reg"]] if isinstance(weights, dict) else weights
    np.testing.assert_allclose(got["loss"], w[0] * np.array(got["cls_loss"]) + w[1] * np.array(got["reg_loss"]),
                               rtol=1e-5)
    for a, b in zip(ours.get_weights(), theirs.get_weights()):
        np.testing.assert_allclose(a, b, atol=1e-6)
    np.testing.assert_allclose(ours.evaluate(x, labels(ya, yb), verbose=0),
                               theirs.evaluate(x, labels(ya, yb), verbose=0), rtol=1e-5)
    assert ours.metrics_names == ["loss", "cls_loss", "reg_loss", "cls_" + kwargs["metrics"]["cls"][0]
                                  if isinstance(kwargs["metrics"], dict) else "cls_accuracy"]


def test_one_loss_for_every_output_and_an_output_without_loss():
    flow.clear_session()
    x, ya, yb = data()
    model = two_heads(flow)
    model.compile("sgd", loss="mse")                       # one loss: every output, as Keras applies it
    onehot = np.eye(3, dtype=np.float32)[ya]
    history = model.fit(x, [onehot, yb], verbose=0).history
    assert sorted(history) == ["cls_loss", "loss", "reg_loss"]
    model.compile("sgd", loss={"reg": "mse"})              # "cls" has no loss: it takes no labels
    assert model.metrics_names == ["loss", "reg_loss"]
    before = model.get_weights()
    model.fit(x, {"reg": yb}, verbose=0)
    for i in (2, 3):                                      # cls/kernel, cls/bias: not trained
        np.testing.assert_array_equal(model.get_weights()[i], before[i])


@pytest.mark.parametrize("compile_kwargs, fit_y, error, message", [
    ({"loss": ["mse"]}, None, flow.ConfigError, r"loss expected 2 entries, one per output \['cls', 'reg'\]"),
    ({"loss": {"clss": "mse"}}, None, flow.ConfigError, r"loss names outputs \['clss'\]"),
    ({"loss": "mse", "metrics": ["mae"]}, None, flow.ConfigError, "one list of metrics per output"),
    ({"loss": "mse", "loss_weights": [1.0, "x"]}, None, flow.ConfigError, "loss_weights for output 'reg'"),
    ({"loss": "mse"}, lambda ya, yb: [ya], flow.InputError, r"y expected a list of 2 label arrays"),
    ({"loss": "mse"}, lambda ya, yb: {"cls": ya, "regg": yb}, flow.InputError, r"y names outputs \['regg'\]"),
    ({"loss": {"cls": "mse", "reg": "mse"}}, lambda ya, yb: {"cls": np.eye(3)[ya]}, flow.InputError,
     "expected labels for output 'reg'"),
])
def test_multi_output_mistakes_are_named(compile_kwargs, fit_y, error, message):
    flow.clear_session()
    x, ya, yb = data()
    model = two_heads(flow)
    if fit_y is None:
        with pytest.raises(error, match=message):
            model.compile("sgd", **compile_kwargs)
        return
    model.compile("sgd", **compile_kwargs)
    with pytest.raises(error, match=message):
        model.fit(x, fit_y(ya, yb), verbose=0)
    model.fit(x, [np.eye(3, dtype=np.float32)[ya], yb], verbose=0)        # the model trains on


def test_inputs_and_outputs_as_dicts_as_keras_takes_them():
    """Keras' dict models: data keyed by input name, results and losses keyed by output name."""
    flow.clear_session()

    def build(api):
        image, meta = api.Input((4,), name="image"), api.Input((2,), name="meta")
        h = api.layers.concatenate([api.layers.Dense(3, activation="relu")(image), meta])
        return api.Model({"image": image, "meta": meta},
                         {"kind": api.layers.Dense(3, activation="softmax")(h), "score": api.layers.Dense(1)(h)})

    ours, theirs = build(flow), build(keras)
    theirs.set_weights(ours.get_weights())
    rng = np.random.default_rng(4)
    x = {"meta": rng.random((12, 2)).astype(np.float32), "image": rng.random((12, 4)).astype(np.float32)}
    y = {"score": rng.random((12, 1)).astype(np.float32), "kind": rng.integers(0, 3, 12)}
    kwargs = {"loss": {"kind": "sparse_categorical_crossentropy", "score": "mse"}, "metrics": {"kind": ["accuracy"]}}
    ours.compile(flow.optimizers.SGD(0.1), **kwargs)
    theirs.compile(keras.optimizers.SGD(0.1), **kwargs)
    assert ours.output_names == ["kind", "score"] and ours.input_names == ["image", "meta"]
    got, want = ours.predict(x, verbose=0), theirs.predict(x, verbose=0)
    assert sorted(got) == ["kind", "score"]
    for key in want:
        np.testing.assert_allclose(got[key], want[key], atol=1e-6)
    history = ours.fit(x, y, batch_size=4, shuffle=False, verbose=0).history
    expected = theirs.fit(x, y, batch_size=4, shuffle=False, verbose=0).history
    assert sorted(history) == sorted(expected)
    np.testing.assert_allclose(history["loss"], expected["loss"], rtol=1e-5)
    for a, b in zip(ours.get_weights(), theirs.get_weights()):
        np.testing.assert_allclose(a, b, atol=1e-6)
    with pytest.raises(flow.InputError, match=r"x as a dict expected the input names \['image', 'meta'\], received "
                                              r"\['image', 'metadata'\]; unknown: \['metadata'\]; missing: \['meta'\]"):
        ours.predict({"image": x["image"], "metadata": x["meta"]}, verbose=0)
