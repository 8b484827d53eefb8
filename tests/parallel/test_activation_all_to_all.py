"""Moving the ``model`` axis of a rank-4 activation from one split dim to another (Boxing S(i) -> S(j), an
all-to-all) gives the values of one device, forward and in a training step, on the 2x2 ``data x model`` mesh.

DTensor (TF 2.21) does such a move of a rank-4 tensor between dims other than 0 with an all-to-all that silently
permutes the blocks (bench/probe_dtensor_einsum_bias.py): an EinsumDense with a per-head bias split over ``model``
followed by a Dense predicted values off by up to 3.5 (tests/layers/test_existing_layers_on_a_mesh.py).  The
tensorflow backend moves those in two (gather, then slice); the jax backend runs the same tests.
"""
import itertools

import numpy as np
import pytest

import flowlayers as flow
import places
from flowlayers.sbp import S

BATCH, SHAPE = 8, (4, 2, 4)


def model(move=None):
    """(batch, 4, 2, 4) -> Dense(4) relu -> square -> Dense(2): the relu's output laid out S(i) on ``model``, the
    square's S(j) (``move``: (i, j); None: unconstrained)."""
    x = flow.Input(SHAPE)
    h = flow.nn.relu(flow.layers.Dense(4, name="mix")(x))
    if move is not None:
        h = h.with_sbp(S(0), S(move[0]))
    h = flow.math.square(h)
    if move is not None:
        h = h.with_sbp(S(0), S(move[1]))
    return flow.Model(x, flow.layers.Dense(2, name="head")(h))


def data():
    rng = np.random.default_rng(0)
    return (rng.uniform(-1, 1, (BATCH,) + SHAPE).astype(np.float32),
            rng.normal(size=(BATCH,) + SHAPE[:-1] + (2,)).astype(np.float32))


def numpy_forward(weights, x):
    mix_k, mix_b, head_k, head_b = [w.astype(np.float64) for w in weights]
    return np.square(np.maximum(x.astype(np.float64) @ mix_k + mix_b, 0)) @ head_k + head_b


def predict_and_step(m, weights, x, y):
    m.set_weights(weights)
    out = m.predict(x, verbose=0)
    m.compile(flow.optimizers.SGD(0.1), "mse")
    m.train_on_batch(x, y)
    return out, m.get_weights()


@pytest.mark.parametrize("move", list(itertools.permutations((1, 2, 3), 2)), ids=lambda m: f"S{m[0]}-S{m[1]}")
def test_rank4_all_to_all_is_one_devices_result(move):
    x, y = data()
    places.use("mirrored", 1, fresh=True)
    m = model()
    weights = m.get_weights()
    want, want_weights = predict_and_step(m, weights, x, y)
    np.testing.assert_allclose(want, numpy_forward(weights, x), rtol=1e-5, atol=1e-5)
    places.use("consistent", 4, {"data": 2, "model": 2}, fresh=True)
    m = model(move)
    moves = [kind for b in m.parallel_plan(BATCH).boxing for _, kind in b.collectives]
    assert "all-to-all" in moves, moves     # the move this test is about is in the plan
    got, got_weights = predict_and_step(m, weights, x, y)
    np.testing.assert_allclose(got, numpy_forward(weights, x), rtol=1e-5, atol=1e-5, err_msg="forward")
    for g, w, v in zip(got_weights, want_weights, m.weights):
        np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-5, err_msg=f"{v.path} after a step")


def test_einsum_heads_with_bias_then_dense_is_numpy():
    """The case that showed it: per-head EinsumDense, its kernel and bias split over ``model`` on the head dim,
    then a Dense with a bias; predicted as numpy predicts it in float64."""
    x = data()[0][:, :, 0, :].reshape(BATCH, 4, 4)
    places.use("consistent", 4, {"data": 2, "model": 2}, fresh=True)
    flow.config.set_layout_rules({"^einsum_dense/kernel$": (None, None, "model"),
                                  "^einsum_dense/bias$": (None, "model")})
    try:
        inputs = flow.Input((4, 4))
        h = flow.layers.EinsumDense("abc,cde->abde", (None, 2, 4), bias_axes="de", activation="relu",
                                    bias_initializer="random_normal")(inputs)
        m = flow.Model(inputs, flow.layers.Dense(2, name="head")(h))
        kernel, bias, head_k, head_b = [w.astype(np.float64) for w in m.get_weights()]
        got = m.predict(x, verbose=0)
    finally:
        flow.config.set_layout_rules({})
    want = np.maximum(np.einsum("abc,cde->abde", x.astype(np.float64), kernel) + bias, 0) @ head_k + head_b
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
