"""Under ``mixed_bfloat16`` an MLP trains as Keras 3 trains it under that policy on the same engine: five steps from
the same start end closer to Keras' run than to flowlayers' own float32 run (it casts where Keras casts), in both
views; and two epochs on real digits reach float32's test accuracy."""
import numpy as np
import pytest
from keras_runs import distance, keras_runs, mlp, train, use

import flowlayers as flow

CASE = {"policy": "mixed_bfloat16", "features": 16, "layers": [[32, "relu", None], [32, "relu", None], [10, None, None]],
        "optimizer": {"class": "SGD", "learning_rate": 0.1}, "loss_scale": None}
STEPS, BATCH = 5, 32


def start():
    """The initial weights (Keras order) and the batches, from a seeded generator."""
    rng = np.random.default_rng(3)
    weights, fan_in = [], CASE["features"]
    for units, _, _ in CASE["layers"]:
        weights += [rng.uniform(-1, 1, (fan_in, units)).astype(np.float32) * np.float32(np.sqrt(6 / (fan_in + units))),
                    rng.uniform(-0.1, 0.1, units).astype(np.float32)]
        fan_in = units
    xs = rng.normal(size=(STEPS, BATCH, CASE["features"])).astype(np.float32)
    ys = (np.abs(xs[..., :10]).argmax(-1)).astype(np.int32)
    return weights, xs, ys


@pytest.fixture(scope="module")
def keras_mixed(tmp_path_factory):
    weights, xs, ys = start()
    return keras_runs([CASE], [weights], [(xs, ys)], tmp_path_factory.mktemp("keras"))[0][0]


@pytest.mark.slow
@pytest.mark.parametrize("place", ["one", "2x2", "mirrored2"])
def test_five_mixed_bfloat16_steps_end_closer_to_keras_than_to_float32(place, keras_mixed):
    weights, xs, ys = start()
    use(place)
    mixed = mlp(CASE, weights)
    assert mixed.layers[1].compute_dtype == flow.bfloat16 and mixed.outputs[0].dtype == flow.bfloat16
    ours = train(mixed, xs, ys)[0]
    assert all(w.dtype == np.float32 for w in ours)          # variables stay float32
    use(place)
    float32 = train(mlp({**CASE, "policy": "float32"}, weights), xs, ys)[0]
    to_keras, to_float32 = distance(ours, keras_mixed), distance(ours, float32)
    print(f"{place}: |ours - Keras mixed_bfloat16| = {to_keras:.2e}, |ours - ours float32| = {to_float32:.2e}")
    assert to_keras < 0.75 * to_float32      # (one device on TF: equal to Keras bit for bit)


@pytest.mark.slow
@pytest.mark.parametrize("place", ["2x2", "mirrored2"])
def test_two_mixed_bfloat16_epochs_reach_float32_test_accuracy_on_digits(place):
    (x, y), (x_test, y_test) = flow.data.load_digits(image_format="NHWC")
    x, x_test = x.reshape(len(x), -1), x_test.reshape(len(x_test), -1)
    accuracy = {}
    for policy in ("float32", "mixed_bfloat16"):
        use(place)
        flow.mixed_precision.set_global_policy(policy)
        inputs = flow.Input((64,))
        h = flow.layers.Dense(64, activation="relu")(inputs)
        h = flow.layers.LayerNormalization()(h)
        out = flow.layers.Dense(10, dtype="float32")(flow.layers.Dense(64, activation="relu")(h))
        model = flow.Model(inputs, out)
        flow.mixed_precision.set_global_policy(None)
        model.compile(flow.optimizers.Adam(0.003), flow.losses.SparseCategoricalCrossentropy(from_logits=True),
                      metrics=["accuracy"])
        model.fit(x, y, batch_size=32, epochs=2, verbose=0)
        accuracy[policy] = model.evaluate(x_test, y_test, verbose=0)[1]
    print(place, accuracy)
    assert accuracy["float32"] > 0.85
    assert abs(accuracy["mixed_bfloat16"] - accuracy["float32"]) <= 0.03
