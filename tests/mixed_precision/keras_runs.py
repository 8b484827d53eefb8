"""The same MLP trained by flowlayers and by Keras 3 (``keras_program.py``, in a process on the same engine), from
the same initial weights on the same batches, one ``train_on_batch`` per batch."""
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np

import flowlayers as flow
import places

PROGRAM = Path(__file__).resolve().parent / "keras_program.py"
PLACES = {"one": ("consistent", 1, None, None),
          "2x2": ("consistent", 4, {"data": 2, "model": 2}, {r"dense_1/kernel": (None, "model")}),
          "mirrored2": ("mirrored", 2, None, None)}


def use(place):
    """A fresh session in ``place``."""
    places.use(*PLACES[place], fresh=True)


def mlp(case, weights=None):
    """flowlayers' MLP of ``case`` (its layers ``dense``, ``dense_1``, ...), compiled as Keras' is."""
    flow.mixed_precision.set_global_policy(case["policy"])
    try:
        x = flow.Input((case["features"],))
        h = x
        for units, activation, dtype in case["layers"]:
            h = flow.layers.Dense(units, activation=activation, dtype=dtype)(h)
        model = flow.Model(x, h)
    finally:
        flow.mixed_precision.set_global_policy(None)
    if weights is not None:
        model.set_weights(weights)
    spec = case["optimizer"]
    optimizer = getattr(flow.optimizers, spec["class"])(learning_rate=spec["learning_rate"])
    if case["loss_scale"]:
        optimizer = flow.optimizers.LossScaleOptimizer(optimizer, **case["loss_scale"])
    model.compile(optimizer, flow.losses.SparseCategoricalCrossentropy(from_logits=True))
    return model


def train(model, xs, ys):
    """One step per batch; with a loss scale, the scale and counter after each."""
    scales, counters = [], []
    for x, y in zip(xs, ys):
        model.train_on_batch(x, y)
        if isinstance(model.optimizer, flow.optimizers.LossScaleOptimizer):
            scales.append(model.optimizer.dynamic_scale)
            counters.append(model.optimizer.step_counter)
    return model.get_weights(), scales, counters


def keras_runs(cases, weights, batches, tmp_path):
    """Keras' final weights (and scales, counters) per case, on the engine flowlayers runs on."""
    arrays = {}
    for k, (w, (xs, ys)) in enumerate(zip(weights, batches)):
        arrays.update({f"{k}_w{i}": a for i, a in enumerate(w)})
        arrays[f"{k}_x"], arrays[f"{k}_y"] = xs, ys
    given, out = tmp_path / "cases.npz", tmp_path / "keras.npz"
    np.savez(given, meta=json.dumps(cases), **arrays)
    env = dict(os.environ, KERAS_BACKEND=flow.config.backend_name(), TF_CPP_MIN_LOG_LEVEL="3")
    done = subprocess.run([sys.executable, str(PROGRAM), str(given), str(out)], env=env, capture_output=True,
                          text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    result = np.load(out)
    return [([result[f"{k}_w{i}"] for i in range(len(w))], list(result[f"{k}_scale"]), list(result[f"{k}_counter"]))
            for k, w in enumerate(weights)]


def distance(a, b):
    """The L2 distance between two lists of weights."""
    return float(np.sqrt(sum(np.sum((np.asarray(x, np.float64) - np.asarray(y, np.float64)) ** 2)
                             for x, y in zip(a, b))))
