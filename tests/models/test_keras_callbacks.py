"""Keras' own callbacks drive ``fit`` in both views: EarlyStopping stops, ModelCheckpoint saves the best epoch's
weights, ReduceLROnPlateau lowers the rate that the next epoch trains with, CSVLogger writes History's numbers and
TensorBoard writes event files that TensorFlow's event reader (TensorBoard's) reads back."""
import csv
import glob

import keras
import numpy as np
import pytest

import flowlayers as flow

tf = pytest.importorskip("tensorflow")     # used beside the backend under test: without it the file is skipped
pytestmark = pytest.mark.needs_tensorflow

PLACES = [("mirrored", 2), ("consistent", 2)]
IDS = [f"{v}{n}" for v, n in PLACES]


@pytest.fixture(scope="module")
def digits():
    (x, y), (xt, yt) = flow.data.load_digits()
    return x[:256], y[:256], (xt[:64], yt[:64])


def model(view, n, lr=0.05):
    flow.config.set_view(view)
    flow.config.gpu_device_num(n)
    flow.clear_session()
    x = flow.Input((1, 8, 8))
    h = flow.layers.Dense(16, activation="relu")(flow.layers.Flatten()(x))
    m = flow.Model(x, flow.layers.Dense(10)(h))
    m.compile(flow.optimizers.SGD(lr), flow.losses.SparseCategoricalCrossentropy(from_logits=True),
              metrics=["accuracy"])
    return m


def fit(m, digits, epochs, callbacks):
    x, y, val = digits
    return m.fit(x, y, batch_size=64, epochs=epochs, validation_data=val, callbacks=callbacks, shuffle=False,
                 verbose=0).history


@pytest.mark.parametrize("view, n", PLACES, ids=IDS)
def test_early_stopping_stops(view, n, digits):
    history = fit(model(view, n), digits, 5, [keras.callbacks.EarlyStopping(monitor="val_loss", patience=0,
                                                                            min_delta=10.0)])
    assert len(history["loss"]) == 2          # the second epoch improved by less than 10: stop


@pytest.mark.parametrize("view, n", PLACES, ids=IDS)
def test_model_checkpoint_keeps_the_best_epoch(view, n, digits, tmp_path):
    per_epoch = []
    m = model(view, n)
    record = keras.callbacks.LambdaCallback(on_epoch_end=lambda epoch, logs: per_epoch.append(m.get_weights()))
    best = keras.callbacks.ModelCheckpoint(str(tmp_path / "best.weights.h5"), monitor="val_loss", mode="max",
                                           save_best_only=True, save_weights_only=True)
    history = fit(m, digits, 3, [record, best])      # mode="max": the worst validation loss counts as best
    worst = int(np.argmax(history["val_loss"]))
    fresh = model(view, n)
    fresh.load_weights(str(tmp_path / "best.weights.h5"))
    for a, b in zip(fresh.get_weights(), per_epoch[worst]):
        np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("view, n", PLACES, ids=IDS)
def test_reduce_lr_on_plateau_lowers_the_rate_the_next_epoch_uses(view, n, digits):
    m = model(view, n)
    fit(m, digits, 3, [keras.callbacks.ReduceLROnPlateau(monitor="val_loss", factor=0.5, patience=0,
                                                         min_delta=10.0)])
    assert m.optimizer.learning_rate == pytest.approx(0.0125)
    by_hand = model(view, n)
    for lr in (0.05, 0.05, 0.025):                   # halved after epochs 2 and 3 (the first sets the best)
        by_hand.optimizer.learning_rate = lr
        fit(by_hand, digits, 1, [])
    for a, b in zip(m.get_weights(), by_hand.get_weights()):
        np.testing.assert_allclose(a, b, atol=1e-6)


@pytest.mark.parametrize("view, n", PLACES, ids=IDS)
def test_csv_logger_and_tensorboard_write_the_history(view, n, digits, tmp_path):
    history = fit(model(view, n), digits, 2, [keras.callbacks.CSVLogger(str(tmp_path / "log.csv")),
                                              keras.callbacks.TensorBoard(str(tmp_path / "tb"))])
    with open(tmp_path / "log.csv") as f:
        rows = list(csv.DictReader(f))
    assert [int(r["epoch"]) for r in rows] == [0, 1]
    for key in ("loss", "accuracy", "val_loss", "val_accuracy"):
        np.testing.assert_allclose([float(r[key]) for r in rows], history[key], rtol=1e-6)
    for folder, prefix in (("train", ""), ("validation", "val_")):
        scalars = {}
        for path in glob.glob(str(tmp_path / "tb" / folder / "events.out.tfevents.*")):
            for event in tf.compat.v1.train.summary_iterator(path):
                for value in event.summary.value:
                    scalars.setdefault(value.tag, {})[event.step] = float(tf.make_ndarray(value.tensor))
        np.testing.assert_allclose([scalars["epoch_loss"][e] for e in (0, 1)], history[prefix + "loss"], rtol=1e-6)
        np.testing.assert_allclose([scalars["epoch_accuracy"][e] for e in (0, 1)], history[prefix + "accuracy"],
                                   rtol=1e-6)
