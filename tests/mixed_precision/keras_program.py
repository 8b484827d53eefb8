"""Keras 3 trains the MLPs a test describes, on the engine ``KERAS_BACKEND`` names: the reference runs of
tests/mixed_precision, started in a process of their own so that Keras runs on the engine flowlayers runs on.

    KERAS_BACKEND=jax python keras_program.py CASES.npz OUT.npz

CASES.npz holds ``meta`` (JSON: a list of cases, each ``{"policy", "layers": [[units, activation, dtype], ...],
"optimizer": {"class", "learning_rate"}, "loss_scale": null | {"initial_scale", "dynamic_growth_steps"}}``) and per
case ``k``: ``k_w<i>`` (the initial weights, Keras order), ``k_x``, ``k_y`` (the batches, stacked).  OUT.npz gets
per case its final weights ``k_w<i>`` and, with a loss scale, the scale and counter after each step ``k_scale``,
``k_counter``.
"""
import json
import sys

import keras
import numpy as np


def run(case, weights, xs, ys):
    keras.mixed_precision.set_global_policy(case["policy"])
    inputs = keras.Input(xs.shape[2:])
    h = inputs
    for units, activation, dtype in case["layers"]:
        h = keras.layers.Dense(units, activation=activation, dtype=dtype)(h)
    model = keras.Model(inputs, h)
    model.set_weights(weights)
    spec = case["optimizer"]
    optimizer = getattr(keras.optimizers, spec["class"])(learning_rate=spec["learning_rate"])
    if case["loss_scale"]:
        optimizer = keras.optimizers.LossScaleOptimizer(optimizer, **case["loss_scale"])
    model.compile(optimizer, keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    scales, counters = [], []
    for x, y in zip(xs, ys):
        model.train_on_batch(x, y)
        if case["loss_scale"]:
            scales.append(float(keras.ops.convert_to_numpy(optimizer.dynamic_scale)))
            counters.append(int(keras.ops.convert_to_numpy(optimizer.step_counter)))
    keras.mixed_precision.set_global_policy("float32")
    return [np.asarray(w) for w in model.get_weights()], scales, counters


def main():
    given = np.load(sys.argv[1])
    out = {}
    for k, case in enumerate(json.loads(str(given["meta"]))):
        count = len(case["layers"]) * 2
        weights = [given[f"{k}_w{i}"] for i in range(count)]
        final, scales, counters = run(case, weights, given[f"{k}_x"], given[f"{k}_y"])
        out.update({f"{k}_w{i}": w for i, w in enumerate(final)})
        out[f"{k}_scale"], out[f"{k}_counter"] = np.asarray(scales), np.asarray(counters)
    np.savez(sys.argv[2], **out)


if __name__ == "__main__":
    main()
