"""Keras 3's ways that keras.io's programs rely on: an ``Input`` of a free length (``shape=(None,)``) takes
sequences of any length (and a weight sized by that length is refused by name, as Keras refuses it), labels of
shape (n,) fit an output of shape (None, 1), and what a callback's ``on_epoch_end`` puts in ``logs`` reaches
``History`` (Keras calls the user's callbacks before its History and progress bar)."""
import numpy as np
import pytest

import flowlayers as flow


@pytest.mark.parametrize("view, n", [("mirrored", 2), ("consistent", 2)])
def test_an_input_of_free_length_trains_and_predicts_any_length(view, n):
    flow.config.set_view(view)
    flow.config.gpu_device_num(n)
    ids = flow.Input((None,))
    outputs = flow.layers.Dense(1)(flow.layers.GRU(4)(flow.layers.Embedding(5, 3)(ids)))
    model = flow.Model(ids, outputs)
    model.compile("sgd", "mse")
    rng = np.random.default_rng(0)
    model.fit(rng.integers(0, 5, (8, 6)), np.ones((8, 1)), verbose=0)
    assert model.predict(rng.integers(0, 5, (4, 9)), verbose=0).shape == (4, 1)
    with pytest.raises(flow.InputError, match=r"expected arrays of shape \(None, None\), received \(4, 9, 1\)"):
        model.predict(rng.integers(0, 5, (4, 9, 1)), verbose=0)


class Logged(flow.callbacks.Callback):
    def on_epoch_end(self, epoch, logs=None):
        logs["twice_loss"] = 2 * logs["loss"]


def test_logs_a_callback_adds_at_the_end_of_an_epoch_reach_history():
    x = flow.Input((2,))
    model = flow.Model(x, flow.layers.Dense(1)(x))
    model.compile("sgd", "mse")
    history = model.fit(np.ones((4, 2)), np.ones((4, 1)), epochs=2, callbacks=[Logged()], verbose=0)
    assert history.history["twice_loss"] == [2 * v for v in history.history["loss"]]


def test_a_weight_sized_by_a_free_length_is_refused_by_name():
    """Keras refuses a Dense on a last axis of unknown size too (a ValueError); here a LayerError names it."""
    flat = flow.layers.Flatten()(flow.layers.Embedding(5, 3)(flow.Input((None,))))
    with pytest.raises(flow.LayerError, match=r"layer 'dense': weight 'kernel' expected a shape of known sizes, "
                                              r"received \(None, 2\)"):
        flow.layers.Dense(2)(flat)


def test_labels_without_the_outputs_trailing_axis_of_one_train_as_with_it():
    """keras.io's binary classifiers fit labels of shape (n,) to a Dense(1): Keras expands them to (n, 1)."""
    x = flow.Input((3,))
    model = flow.Model(x, flow.layers.Dense(1, activation="sigmoid")(x))
    model.compile("sgd", "binary_crossentropy")
    rng = np.random.default_rng(0)
    data, labels = rng.normal(size=(8, 3)), rng.integers(0, 2, 8).astype("float32")
    initial = model.get_weights()
    flat = model.fit(data, labels, epochs=2, shuffle=False, verbose=0).history["loss"]
    model.set_weights(initial)
    column = model.fit(data, labels[:, None], epochs=2, shuffle=False, verbose=0).history["loss"]
    assert flat == column
