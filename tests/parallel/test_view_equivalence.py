"""The promise: switching view or device count changes where work runs, not the result.

Weights after 10 steps in the consistent view (TF DTensor) and the mirrored
view (MirroredStrategy) on 2 and 4 devices equal one device within 1e-5, for
SGD with momentum and Adam, through both faces, with an uneven last batch.
"""
import numpy as np
import pytest

import flowlayers as flow
import flowlayers.typing as tp
from flowlayers.framework.variable import store
from places import use

PLACES = [("consistent", 2), ("consistent", 4), ("mirrored", 2), ("mirrored", 4)]
OPTIMIZERS = {
    "sgd_momentum": lambda: flow.optimizers.SGD(0.1, momentum=0.9),
    "adam": lambda: flow.optimizers.Adam(0.01),
}
BATCH, STEPS = 32, 10
N_SAMPLES = BATCH * (STEPS - 1) + 10    # the 10th batch has 10 rows: uneven over 4 devices


@pytest.fixture(scope="module")
def digits():
    (x, y), _ = flow.data.load_digits()
    return x, y


def keras_model(make_optimizer):
    flow.clear_session()
    x = flow.Input((1, 8, 8))
    h = flow.layers.Conv2D(4, 3, padding="same", activation="relu", data_format="channels_first")(x)
    h = flow.layers.MaxPool2D(2, data_format="channels_first")(h)
    h = flow.layers.Flatten()(h)
    h = flow.layers.LayerNormalization()(h)
    h = flow.layers.Dense(16, activation="relu")(h)
    model = flow.Model(x, flow.layers.Dense(10)(h))
    model.compile(optimizer=make_optimizer(),
                  loss=flow.losses.SparseCategoricalCrossentropy(from_logits=True), metrics=["accuracy"])
    return model


def train_keras(view, n, make_optimizer, data):
    use(view, n)
    model = keras_model(make_optimizer)
    history = model.fit(data[0][:N_SAMPLES], data[1][:N_SAMPLES], batch_size=BATCH, epochs=1, shuffle=False, verbose=0)
    assert model.optimizer.iterations == STEPS
    return model.get_weights(), history.history


def max_diff(a, b):
    return max(float(np.abs(x - y).max()) for x, y in zip(a, b))


@pytest.mark.parametrize("opt", sorted(OPTIMIZERS))
def test_keras_face_matches_one_device(opt, digits):
    ref, ref_hist = train_keras("mirrored", 1, OPTIMIZERS[opt], digits)
    for view, n in PLACES:
        weights, hist = train_keras(view, n, OPTIMIZERS[opt], digits)
        assert max_diff(ref, weights) < 1e-5, (view, n)
        assert hist["loss"][0] == pytest.approx(ref_hist["loss"][0], abs=1e-5)
        assert hist["accuracy"] == ref_hist["accuracy"]


JOB_OPTIMIZERS = {
    "sgd_momentum": lambda: flow.optimizer.SGD(flow.optimizer.PiecewiseConstantScheduler([5], [0.1, 0.05]),
                                               momentum=0.9),
    "adam": lambda: flow.optimizer.Adam(flow.optimizer.PiecewiseConstantScheduler([], [0.01])),
}


def mlp(images):
    h = flow.reshape(images, [images.shape[0], -1])
    h = flow.layers.dense(h, 32, activation=flow.nn.relu, kernel_initializer=flow.truncated_normal(0.1),
                          name="hidden")
    return flow.layers.dense(h, 10, kernel_initializer=flow.truncated_normal(0.1), name="out")


def train_job_face(view, n, opt, data):
    """The same job function body, with the placeholders each view asks for."""
    use(view, n, fresh=True)
    x, y = data
    x, y = x[:BATCH * STEPS], y[:BATCH * STEPS]
    cfg = flow.function_config()
    cfg.default_logical_view(flow.scope.mirrored_view() if view == "mirrored" else flow.scope.consistent_view())
    if view == "mirrored":
        per = BATCH // n

        @flow.global_function(type="train", function_config=cfg)
        def train_job(images: tp.ListNumpy.Placeholder((per, 1, 8, 8)),
                      labels: tp.ListNumpy.Placeholder((per,), dtype=flow.int32)) -> tp.ListNumpy:
            loss = flow.nn.sparse_softmax_cross_entropy_with_logits(labels, mlp(images))
            JOB_OPTIMIZERS[opt]().minimize(loss)
            return loss

        def step(xb, yb):
            return np.concatenate(train_job(np.split(xb, n), np.split(yb, n)))
    else:
        @flow.global_function(type="train", function_config=cfg)
        def train_job(images: tp.Numpy.Placeholder((BATCH, 1, 8, 8)),
                      labels: tp.Numpy.Placeholder((BATCH,), dtype=flow.int32)) -> tp.Numpy:
            loss = flow.nn.sparse_softmax_cross_entropy_with_logits(labels, mlp(images))
            JOB_OPTIMIZERS[opt]().minimize(loss)
            return loss

        step = train_job
    losses = [step(x[i:i + BATCH], y[i:i + BATCH]) for i in range(0, len(x), BATCH)]
    return [store.variables[p].numpy() for p in sorted(store.variables)], losses


@pytest.mark.parametrize("opt", sorted(JOB_OPTIMIZERS))
def test_job_face_matches_one_device(opt, digits):
    ref, ref_losses = train_job_face("mirrored", 1, opt, digits)
    assert ref_losses[-1].mean() < ref_losses[0].mean()
    for view, n in PLACES:
        weights, losses = train_job_face(view, n, opt, digits)
        assert max_diff(ref, weights) < 1e-5, (view, n)
        np.testing.assert_allclose(losses[-1], ref_losses[-1], atol=1e-5)


def test_one_config_line_switches_the_view(digits):
    """The model object is written once; set_view moves it, weights and optimizer state included."""
    use("mirrored", 1)
    ref = keras_model(OPTIMIZERS["adam"])
    data = digits[0][:N_SAMPLES], digits[1][:N_SAMPLES]
    ref.fit(*data, batch_size=BATCH, epochs=2, shuffle=False, verbose=0)
    model = keras_model(OPTIMIZERS["adam"])
    model.fit(*data, batch_size=BATCH, epochs=1, shuffle=False, verbose=0)
    use("consistent", 4)
    model.fit(*data, batch_size=BATCH, epochs=1, shuffle=False, verbose=0)
    assert max_diff(ref.get_weights(), model.get_weights()) < 1e-5
    np.testing.assert_allclose(model.predict(digits[0][:50]), ref.predict(digits[0][:50]), atol=1e-5)


def test_switching_the_view_there_and_back_keeps_training(digits):
    """Back in a view it ran before, a model's step finds its weights where they moved meanwhile (the step compiled
    for that view is reused, and the values it held before the switch are stale)."""
    use("mirrored", 1)
    ref = keras_model(OPTIMIZERS["sgd_momentum"])
    data = digits[0][:N_SAMPLES], digits[1][:N_SAMPLES]
    ref.fit(*data, batch_size=BATCH, epochs=3, shuffle=False, verbose=0)
    model = keras_model(OPTIMIZERS["sgd_momentum"])
    for view, n in [("mirrored", 1), ("consistent", 2), ("mirrored", 1)]:
        use(view, n)
        model.fit(*data, batch_size=BATCH, epochs=1, shuffle=False, verbose=0)
    assert max_diff(ref.get_weights(), model.get_weights()) < 1e-5


def test_one_config_line_switches_a_job_function(digits):
    """Job functions too: rebuilt for the new view, they keep the variables, the optimizer's slots and its step."""
    x, y = digits[0][:BATCH * STEPS], digits[1][:BATCH * STEPS]

    def run(switch_at):
        use("mirrored", 1, fresh=True)

        @flow.global_function(type="train")
        def train_job(images: tp.Numpy.Placeholder((BATCH, 1, 8, 8)),
                      labels: tp.Numpy.Placeholder((BATCH,), dtype=flow.int32)):
            loss = flow.nn.sparse_softmax_cross_entropy_with_logits(labels, mlp(images))
            JOB_OPTIMIZERS["sgd_momentum"]().minimize(loss)   # the rate drops at step 5: the step must carry over
            return loss

        for k, i in enumerate(range(0, len(x), BATCH)):
            if k == switch_at:
                use("consistent", 2)
            train_job(x[i:i + BATCH], y[i:i + BATCH])
        return [store.variables[p].numpy() for p in sorted(store.variables)]

    assert max_diff(run(switch_at=None), run(switch_at=4)) < 1e-5


@pytest.mark.parametrize("mesh", [{"data": 2}, {"data": 2, "model": 2}], ids=["2", "2x2"])
def test_consistent_view_dropout_draws_one_devices_masks(mesh, digits):
    """In the consistent view a dropout mask is the whole logical batch's, drawn as one device draws it, so even a
    model with dropout trains to one device's weights (the mirrored view draws per replica: a documented
    exception).  On a 2x2 mesh a hidden kernel is split over "model" too."""
    def train(view, n, mesh=None, rules=None):
        use(view, n, mesh, rules, fresh=True)
        x = flow.Input((1, 8, 8))
        h = flow.layers.Dense(32, activation="relu", name="hidden")(flow.layers.Flatten()(x))
        model = flow.Model(x, flow.layers.Dense(10, name="out")(flow.layers.Dropout(0.5)(h)))
        model.compile(flow.optimizers.SGD(0.1, momentum=0.9), flow.losses.SparseCategoricalCrossentropy(True))
        model.fit(digits[0][:N_SAMPLES], digits[1][:N_SAMPLES], batch_size=BATCH, shuffle=False, verbose=0)
        return model.get_weights()

    one = train("mirrored", 1)
    rules = {"hidden/kernel": (None, "model")} if "model" in mesh else None
    assert max_diff(train("consistent", 4 if "model" in mesh else 2, mesh, rules), one) < 1e-5
    assert max_diff(train("mirrored", 2), one) > 1e-3        # the documented exception, still there


def batch_norm_weights(view, n):
    use(view, n, seed=3, fresh=True)
    x = flow.Input((6,))
    h = flow.layers.BatchNormalization()(flow.layers.Dense(8, activation="relu")(x))
    model = flow.Model(x, flow.layers.Dense(3)(h))
    model.compile(flow.optimizers.SGD(0.1, momentum=0.9),
                  flow.losses.SparseCategoricalCrossentropy(from_logits=True))
    rng = np.random.default_rng(7)
    xs, ys = rng.normal(size=(13, 6)).astype(np.float32), rng.integers(0, 3, 13).astype(np.int32)
    model.fit(xs, ys, batch_size=8, epochs=2, shuffle=False, verbose=0)
    return {w.path: w.numpy() for w in model.weights}


@pytest.mark.parametrize("view, n", [p for p in PLACES if p[0] == "consistent"])
def test_batch_statistics_of_an_uneven_last_batch_are_of_its_rows_only(view, n):
    """BatchNormalization with a last batch of 5 rows split over 2 or 4 devices (some get fewer rows): the batch's
    mean and variance, so the training and the moving statistics, are those of its 5 rows, as on one device.  (The
    mirrored view's are each replica's own: the documented exception, DESIGN.md.)"""
    want = batch_norm_weights("consistent", 1)
    got = batch_norm_weights(view, n)
    assert got.keys() == want.keys()
    for path in want:
        np.testing.assert_allclose(got[path], want[path], rtol=1e-5, atol=1e-6, err_msg=path)
