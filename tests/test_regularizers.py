"""Regularizers with each face's meaning: Keras' ``kernel_regularizer=L2(0.05)`` adds ``0.05 * sum(w ** 2)`` to
the loss (checked against Keras 3, reported loss included); OneFlow's ``flow.regularizers.l2(0.1)`` given to
``flow.get_variable`` or ``flow.layers.dense`` adds ``0.1 * w`` to the gradient (checked against numpy float64,
the returned loss without it).  In every view and device count."""
import keras
import numpy as np
import pytest

import flowlayers as flow
import flowlayers.typing as tp
from flowlayers.framework.variable import store
from places import use

PLACES = [("mirrored", 1), ("mirrored", 2), ("consistent", 2)]
RNG = np.random.default_rng(0)
X = RNG.normal(size=(16, 5)).astype(np.float32)
Y = RNG.integers(0, 3, 16).astype(np.int32)


def keras_style(api):
    R, L = api.regularizers, api.layers
    x = api.Input((5,))
    h = L.Dense(4, activation="tanh", kernel_regularizer=R.L2(0.05), bias_regularizer=R.L1(0.02))(x)
    h = L.Dense(4, kernel_regularizer=R.l1_l2(l1=0.01, l2=0.02), bias_regularizer="l2")(h)
    return api.Model(x, L.Dense(3, kernel_regularizer=R.l2(0.03), bias_regularizer=R.l1(0.04))(h))


@pytest.mark.parametrize("view, n", PLACES)
def test_keras_regularizers_train_and_report_the_loss_as_keras_does(view, n):
    use(view, n)
    ours, theirs = keras_style(flow), keras_style(keras)
    theirs.set_weights(ours.get_weights())
    ours.compile(flow.optimizers.SGD(0.1), flow.losses.SparseCategoricalCrossentropy(from_logits=True))
    theirs.compile(keras.optimizers.SGD(0.1), keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    got = ours.fit(X, Y, batch_size=8, epochs=2, shuffle=False, verbose=0).history["loss"]
    want = theirs.fit(X, Y, batch_size=8, epochs=2, shuffle=False, verbose=0).history["loss"]
    np.testing.assert_allclose(got, want, rtol=1e-6)
    for a, b in zip(ours.get_weights(), theirs.get_weights()):
        np.testing.assert_allclose(a, b, atol=1e-6)
    # the evaluated loss is the data loss plus the penalties, in numpy float64
    k1, b1, k2, b2, k3, b3 = (w.astype(np.float64) for w in ours.get_weights())
    logits = np.tanh(X @ k1 + b1) @ k2 + b2
    logits = logits @ k3 + b3
    p = np.exp(logits - logits.max(1, keepdims=True))
    data = -np.log(p[np.arange(16), Y] / p.sum(1)).mean()
    penalty = (0.05 * (k1 ** 2).sum() + 0.02 * abs(b1).sum() + 0.01 * abs(k2).sum() + 0.02 * (k2 ** 2).sum()
               + 0.01 * (b2 ** 2).sum() + 0.03 * (k3 ** 2).sum() + 0.04 * abs(b3).sum())
    assert penalty > 0.05
    np.testing.assert_allclose(ours.evaluate(X, Y, verbose=0), data + penalty, rtol=1e-5)


def oneflow_job(l1, l2):
    flow.clear_default_session()

    @flow.global_function(type="train")
    def train_job(x: tp.Numpy.Placeholder((16, 5)), t: tp.Numpy.Placeholder((16, 3))) -> tp.Numpy:
        w = flow.get_variable("w", (5, 3), initializer=flow.random_normal_initializer(stddev=0.5),
                              regularizer=flow.regularizers.l1_l2(l1=l1, l2=l2))
        y = flow.layers.dense(flow.matmul(x, w), 3, use_bias=False, name="fc",
                              kernel_initializer=flow.random_normal_initializer(stddev=0.5),
                              kernel_regularizer=flow.regularizers.l2(0.2))
        loss = flow.math.reduce_mean(flow.math.square(y - t), axis=1)
        flow.optimizer.SGD(flow.optimizer.PiecewiseConstantScheduler([], [0.1])).minimize(loss)
        return loss
    return train_job


@pytest.mark.parametrize("view, n", [("consistent", 1), ("consistent", 2)])
def test_oneflow_regularizers_add_their_term_to_the_gradient(view, n):
    use(view, n)
    t = RNG.normal(size=(16, 3)).astype(np.float32)
    job = oneflow_job(l1=0.01, l2=0.1)
    losses = [job(X, t) for _ in range(3)]
    trained = {path: store.variables[path].numpy() for path in ("w", "fc/kernel")}
    # numpy float64: OneFlow's update w -= lr * (dL/dw + l1 * sign(w) + l2 * w)
    flow.clear_default_session()
    w, v = (store_initial("w"), store_initial("fc/kernel"))
    x, target = X.astype(np.float64), t.astype(np.float64)
    for step in range(3):
        y = x @ w @ v
        np.testing.assert_allclose(losses[step], ((y - target) ** 2).mean(axis=1), rtol=2e-5)   # no penalty in it
        dy = 2 * (y - target) / y.size
        gw, gv = x.T @ dy @ v.T, (x @ w).T @ dy
        w, v = w - 0.1 * (gw + 0.01 * np.sign(w) + 0.1 * w), v - 0.1 * (gv + 0.2 * v)
    np.testing.assert_allclose(trained["w"], w, atol=2e-6)
    np.testing.assert_allclose(trained["fc/kernel"], v, atol=2e-6)


def store_initial(path):
    """The initial value of job variable ``path``: the job built again, untrained."""
    job = oneflow_job(0.01, 0.1)
    job.parallel_plan(16)                       # builds (and initialises) without a step
    return store.variables[path].numpy().astype(np.float64)


def test_get_variable_random_seed_and_reuse():
    def value(global_seed, random_seed):
        flow.clear_default_session()
        flow.config.set_seed(global_seed)

        @flow.global_function(type="predict")
        def peek(x: tp.Numpy.Placeholder((1, 4))) -> tp.Numpy:
            return flow.get_variable("v", (4, 4), initializer=flow.random_normal_initializer(),
                                     random_seed=random_seed)
        return peek(np.zeros((1, 4), np.float32))

    np.testing.assert_array_equal(value(1, 7), value(2, 7))          # its own seed: the global one does not matter
    assert not np.array_equal(value(1, 7), value(1, 8))
    assert not np.array_equal(value(1, None), value(2, None))

    flow.clear_default_session()

    @flow.global_function(type="predict")
    def twice(x: tp.Numpy.Placeholder((1, 4))) -> tp.Numpy:
        a = flow.get_variable("u", (4, 4))
        return flow.matmul(x, a) + flow.matmul(x, flow.get_variable("u", (4, 4), reuse=False))

    with pytest.raises(flow.GraphError, match=r"flow.get_variable\('u'\): reuse=False expected no variable of that "
                                              r"name, received one that exists"):
        twice(np.zeros((1, 4), np.float32))


def test_a_saved_model_keeps_its_regularizers(tmp_path):
    model = keras_style(flow)
    model.compile(flow.optimizers.SGD(0.1), flow.losses.SparseCategoricalCrossentropy(from_logits=True))
    model.save(tmp_path / "m")
    loaded = flow.models.load_model(tmp_path / "m")
    assert [repr(w.regularizer) for w in loaded.weights] == [repr(w.regularizer) for w in model.weights]
    assert loaded.evaluate(X, Y, verbose=0) == model.evaluate(X, Y, verbose=0)


def test_the_lower_case_names_take_each_face_s_defaults():
    R = flow.regularizers
    keras_l1, keras_l2, keras_both = (R.get(f(), "x") for f in (R.l1, R.l2, R.l1_l2))
    assert (keras_l1.l1, keras_l2.l2, keras_both.l1, keras_both.l2) == (0.01, 0.01, 0.0, 0.0)      # Keras 3's
    oneflow = [R.get(f(), "x", convention="oneflow") for f in (R.l1, R.l2, R.l1_l2)]
    assert [(r.l1, r.l2) for r in oneflow] == [(0.01, 0.0), (0.0, 0.005), (0.01, 0.005)]          # l2 / 2: OneFlow's
    assert R.get("l1l2", "x").get_config() == {"l1": 0.0, "l2": 0.0}


@pytest.mark.parametrize("make, message", [
    (lambda: flow.layers.Dense(2, kernel_regularizer="l3"), r"layer 'dense': kernel_regularizer: expected a "
                                                            r"flow.regularizers.\* regularizer, one of .* received 'l3'"),
    (lambda: flow.regularizers.L2(-0.1), r"regularizer L2: l2 expected a number >= 0, received -0.1"),
    (lambda: flow.regularizers.l2("big"), r"regularizer: l2 expected a number >= 0, received 'big'"),
])
def test_wrong_regularizers_are_named(make, message):
    with pytest.raises(flow.LayerError, match=message):
        make()
