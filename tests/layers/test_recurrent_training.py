"""An LSTM text classifier and a GRU time-series classifier train to Keras 3's accuracy (within 0.02) on the same
data, from the same initial weights, with the same optimizer, batches and epochs.  Keras runs on JAX, in a
process of its own (``keras_recurrent_run.py``): on TensorFlow its Adam takes an embedding's sparse gradient rows
one occurrence at a time into the second moment, another update than the dense one (JAX's, and flowlayers').

The data are made here, deterministically: padded "reviews" whose label says whether they hold more words of a
positive set than of a negative one (masked by ``Embedding(mask_zero=True)``), and noisy waves whose label says
whether their frequency is above a threshold close to most of them.
"""
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import flowlayers as flow

HERE = Path(__file__).resolve().parent

EPOCHS, BATCH = 4, 32


def reviews(rng, n, length=20, vocabulary=60):
    lengths = rng.integers(4, length + 1, n)
    ids = np.zeros((n, length), np.int32)
    for row, k in enumerate(lengths):
        ids[row, :k] = rng.integers(1, vocabulary, k)
    positive = np.isin(ids, np.arange(1, 6)).sum(1)
    negative = np.isin(ids, np.arange(6, 11)).sum(1)
    keep = positive != negative
    return ids[keep], (positive > negative)[keep].astype(np.float32)[:, None]


def waves(rng, n, length=40):
    frequency = rng.uniform(0.05, 0.25, n)
    t = np.arange(length)
    x = np.sin(2 * np.pi * frequency[:, None] * t + rng.uniform(0, 2 * np.pi, (n, 1)))
    x = x + rng.normal(scale=0.6, size=x.shape)
    return x[..., None].astype(np.float32), (frequency > 0.15).astype(np.float32)[:, None]


def text_model(api):
    ids = api.Input((20,), dtype="int32")
    h = api.layers.Embedding(60, 16, mask_zero=True)(ids)
    return api.Model(ids, api.layers.Dense(1, activation="sigmoid")(api.layers.LSTM(16)(h)))


def series_model(api):
    x = api.Input((40, 1))
    h = api.layers.GRU(16, return_sequences=True)(x)
    return api.Model(x, api.layers.Dense(1, activation="sigmoid")(api.layers.GRU(8)(h)))


def accuracies(make, data, learning_rate, tmp_path):
    """Keras' test accuracy (on JAX, in its own process) and flowlayers', both from flowlayers' initial weights."""
    rng = np.random.default_rng(0)
    (x, y), (x_test, y_test) = data(rng, 1536), data(rng, 512)
    ours = make(flow)
    weights = ours.get_weights()
    np.savez(tmp_path / "in.npz", make=make.__name__, weights=len(weights), learning_rate=learning_rate, x=x, y=y,
             x_test=x_test, y_test=y_test, **{f"w{i}": w for i, w in enumerate(weights)})
    done = subprocess.run([sys.executable, str(HERE / "keras_recurrent_run.py"), str(tmp_path / "in.npz"),
                           str(tmp_path / "out.json")], cwd=HERE, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    theirs = json.loads((tmp_path / "out.json").read_text())
    assert theirs["backend"] == "jax"
    ours.compile(flow.optimizers.Adam(learning_rate), "binary_crossentropy")
    ours.fit(x, y, batch_size=BATCH, epochs=EPOCHS, shuffle=False, verbose=0)
    return theirs["accuracy"], float(np.mean((ours.predict(x_test, verbose=0) > 0.5) == (y_test > 0.5)))


@pytest.mark.slow
@pytest.mark.parametrize("make, data, learning_rate", [(text_model, reviews, 1e-2), (series_model, waves, 5e-3)],
                         ids=["lstm_text", "gru_series"])
def test_trains_to_keras_accuracy(make, data, learning_rate, tmp_path):
    flow.config.set_view("mirrored")
    flow.config.gpu_device_num(1)
    keras_accuracy, accuracy = accuracies(make, data, learning_rate, tmp_path)
    assert keras_accuracy > 0.8, keras_accuracy          # the task is learnt, not guessed
    assert abs(accuracy - keras_accuracy) <= 0.02, (accuracy, keras_accuracy)
