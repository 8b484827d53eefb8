"""``gradient_accumulation_steps`` (Keras 3's optimizer argument): the variables change every K-th step, by the
rule applied to the mean of the last K gradients; checked against Keras 3 itself and, for SGD, against one step
on the K micro-batches as one batch; in every view; the accumulator is optimizer state a checkpoint keeps."""
import keras
import numpy as np
import pytest

import flowlayers as flow
from places import use

RNG = np.random.default_rng(2)
X = RNG.normal(size=(16, 5)).astype(np.float32)
Y = RNG.normal(size=(16, 3)).astype(np.float32)
PLACES = [("mirrored", 1), ("mirrored", 2), ("consistent", 2)]


def mlp(api):
    x = api.Input((5,))
    return api.Model(x, api.layers.Dense(3)(api.layers.Dense(8, activation="tanh")(x)))


@pytest.mark.parametrize("view, n", PLACES)
@pytest.mark.parametrize("rule", ["sgd", "adam"])
def test_accumulated_steps_are_keras(view, n, rule):
    use(view, n)
    ours, theirs = mlp(flow), mlp(keras)
    theirs.set_weights(ours.get_weights())
    make = {"sgd": lambda api: api.optimizers.SGD(0.1, momentum=0.9, gradient_accumulation_steps=2),
            "adam": lambda api: api.optimizers.Adam(0.01, gradient_accumulation_steps=3)}[rule]
    for model, api in ((ours, flow), (theirs, keras)):
        model.compile(make(api), "mse")
    start = ours.get_weights()
    ours.train_on_batch(X[:4], Y[:4])
    for a, b in zip(ours.get_weights(), start):                 # no update on the first step
        np.testing.assert_array_equal(a, b)
    theirs.train_on_batch(X[:4], Y[:4])
    for i in range(1, 4):
        ours.train_on_batch(X[4 * i:4 * i + 4], Y[4 * i:4 * i + 4])
        theirs.train_on_batch(X[4 * i:4 * i + 4], Y[4 * i:4 * i + 4])
    for a, b in zip(ours.get_weights(), theirs.get_weights()):
        np.testing.assert_allclose(a, b, atol=1e-6)


def test_sgd_over_k_micro_batches_is_one_step_on_their_union():
    use("consistent", 2)
    accumulating, whole = mlp(flow), mlp(flow)
    whole.set_weights(accumulating.get_weights())
    accumulating.compile(flow.optimizers.SGD(0.1, gradient_accumulation_steps=4), "mse")
    whole.compile(flow.optimizers.SGD(0.1), "mse")
    accumulating.fit(X, Y, batch_size=4, shuffle=False, verbose=0)           # 4 micro-batches, one update
    whole.fit(X, Y, batch_size=16, shuffle=False, verbose=0)
    for a, b in zip(accumulating.get_weights(), whole.get_weights()):
        np.testing.assert_allclose(a, b, atol=1e-6)


def test_the_accumulator_is_checkpointed_and_refusals_are_named(tmp_path):
    use("mirrored", 1)
    model = mlp(flow)
    model.compile(flow.optimizers.SGD(0.1, gradient_accumulation_steps=2), "mse")
    model.train_on_batch(X[:4], Y[:4])                       # half way: the accumulator holds one gradient
    model.save_weights(tmp_path / "ckpt")
    flow.clear_session()
    resumed = mlp(flow)                                      # the same layer names, other initial weights
    resumed.compile(flow.optimizers.SGD(0.1, gradient_accumulation_steps=2), "mse")
    resumed.load_weights(tmp_path / "ckpt")
    for m in (model, resumed):
        m.train_on_batch(X[4:8], Y[4:8])
    for a, b in zip(model.get_weights(), resumed.get_weights()):
        np.testing.assert_array_equal(a, b)
    for bad in (1, 2.0, True):
        with pytest.raises(flow.ConfigError, match=rf"SGD: gradient_accumulation_steps expected None or an int >= 2, "
                                                   rf"received {bad!r}"):
            flow.optimizers.SGD(0.1, gradient_accumulation_steps=bad)
