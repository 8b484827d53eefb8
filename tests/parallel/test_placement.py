"""OneFlow's ``flow.scope.placement`` on some of the devices, in the consistent view: the ops and variables built
inside run on those devices only (each Blob whole on each of them), the tensors crossing between placements are
copied (forward and backward) and listed by ``parallel_plan()``, and training equals one device.  What the
engine cannot run is refused by name before any step.

On the tensorflow backend (DTensor: a mesh per placement) the placed models train.  The jax backend compiles a step
as one XLA program over the whole mesh and runs no placement on some devices: there each test checks that the step
is refused by name before it runs (``places.placement_refused``)."""
import numpy as np
import pytest

import flowlayers as flow
import flowlayers.typing as tp
from flowlayers.framework.variable import store
from places import devices_of, named, placement_refused, refusal, runs_placements_on_some_devices

RNG = np.random.default_rng(0)
X = RNG.normal(size=(8, 6)).astype(np.float32)
Y = RNG.integers(0, 3, 8).astype(np.int32)


def pipeline(first, second, dropout=False, loss_inside=True):
    """OneFlow's model-parallel page: the hidden layer on ``first``, the output layer (and loss) on ``second``."""
    flow.clear_default_session()
    flow.config.set_seed(1)

    def place(devices):
        return flow.scope.placement("cpu", devices) if devices else flow.scope.placement("cpu", "0:0")

    @flow.global_function(type="train")
    def train_job(x: tp.Numpy.Placeholder((8, 6)), y: tp.Numpy.Placeholder((8,), dtype=flow.int32)) -> tp.Numpy:
        with place(first):
            h = flow.layers.dense(x, 16, activation=flow.nn.relu, name="hidden")
            if dropout:
                h = flow.nn.dropout(h, rate=0.25)
        with place(second):
            logits = flow.layers.dense(h, 3, name="output")
            if loss_inside:
                loss = flow.nn.sparse_softmax_cross_entropy_with_logits(y, logits)
        if not loss_inside:
            loss = flow.nn.sparse_softmax_cross_entropy_with_logits(y, logits)
        flow.optimizer.SGD(flow.optimizer.PiecewiseConstantScheduler([], [0.1]), momentum=0.9).minimize(loss)
        return loss
    return train_job


def train(devices, first, second, dropout=False):
    flow.config.set_view("consistent")
    flow.config.gpu_device_num(devices)
    job = pipeline(first, second, dropout)
    losses = [job(X, Y) for _ in range(3)]
    return job, losses, {path: var.numpy() for path, var in store.variables.items()}


@pytest.mark.parametrize("devices, first, second, dropout", [
    (2, "0:0", "0:1", False), (4, "0:0-1", "0:2-3", True), (4, "0:2-3", ["0:0", "0:1"], False),
    (4, "0:3", "0:1", True)])
def test_layers_placed_on_some_devices_train_to_one_device_weights(devices, first, second, dropout):
    _, want_losses, want = train(1, None, None, dropout)
    if not runs_placements_on_some_devices():
        with placement_refused("variable 'hidden/kernel'", "train_job", named(devices_of(first))):
            train(devices, first, second, dropout)
        return
    job, losses, got = train(devices, first, second, dropout)
    for a, b in zip(losses, want_losses):
        np.testing.assert_allclose(a, b, rtol=1e-6)
    for path, value in want.items():
        np.testing.assert_allclose(got[path], value, atol=1e-6, err_msg=path)
    plan = job.parallel_plan()
    held = {path: v.devices for path, v in plan.variables.items()}
    assert held["hidden/kernel"] == held["sgd/hidden/kernel/momentum"] == devices_of(first)
    assert held["output/bias"] == held["sgd/output/bias/momentum"] == devices_of(second)
    copies = [(b.producer, b.consumer, b.phase) for b in plan.boxing if b.collectives[0][1] == "copy"]
    assert ("hidden/relu" if not dropout else "dropout", "output/matmul", "forward") in copies
    assert any(c[0] == "grad of output/matmul" and c[2] == "backward" for c in copies), copies
    assert f"0:{devices_of(first)[0]}" in str(plan)


def test_a_loss_on_all_devices_after_a_placement_is_refused_before_any_step():
    flow.config.set_view("consistent")
    flow.config.gpu_device_num(2)
    flow.clear_default_session()
    job = pipeline("0:0", "0:1", loss_inside=False)
    if not runs_placements_on_some_devices():
        refused = placement_refused("variable 'hidden/kernel'", "train_job", "0:0")
    else:
        refused = pytest.raises(flow.ConfigError, match=r"op 'sparse_softmax_cross_entropy' runs on all devices but "
                                                        r"reads 'output/bias_add' made under flow.scope.placement on "
                                                        r"devices 0:1")
    with refused:
        job(X, Y)
    assert "hidden/kernel" not in store.variables or store.variables["hidden/kernel"].location is None


def test_placements_of_different_sizes_in_one_step_are_refused():
    flow.config.set_view("consistent")
    flow.config.gpu_device_num(4)
    job = pipeline("0:3", "0:0-1")
    with refusal("variable 'hidden/kernel'", "train_job", "0:3",
                 r"places op .* on devices 0:3 and op .* on devices 0:0,0:1; expected placements on some devices of "
                 r"one size"):
        job(X, Y)


def test_a_placed_variable_is_not_split():
    flow.config.set_view("consistent")
    flow.config.gpu_device_num(2)
    flow.clear_default_session()

    @flow.global_function(type="predict")
    def job(x: tp.Numpy.Placeholder((8, 6))) -> tp.Numpy:
        with flow.scope.placement("cpu", "0:1"):
            return flow.matmul(x, flow.get_variable("w", (6, 4), distribute=flow.distribute.split(1)))

    with pytest.raises(flow.SBPError, match=r"variable 'w': placed on devices \[1\] \(flow.scope.placement\), "
                                            r"expected no split, received flow.distribute.split\(1\)"):
        job(X)


def test_a_model_built_under_a_placement_is_refused_in_the_mirrored_view():
    flow.config.set_view("consistent")
    flow.config.gpu_device_num(2)
    x = flow.Input((6,))
    with flow.scope.placement("cpu", "0:1"):
        y = flow.layers.Dense(2, name="placed")(x)
    model = flow.Model(x, y)
    if not runs_placements_on_some_devices():
        with placement_refused("variable 'placed/kernel'", "model.predict", "0:1"):
            model.predict(X, verbose=0)
        flow.config.set_view("mirrored")
        with placement_refused("variable 'placed/kernel'", "model.predict", "0:1", view="mirrored"):
            model.predict(X, verbose=0)
        return
    np.testing.assert_allclose(model.predict(X, verbose=0), X @ model.get_weights()[0] + model.get_weights()[1],
                               rtol=1e-5, atol=1e-6)
    flow.config.set_view("mirrored")
    with pytest.raises(flow.ConfigError, match=r"variable 'placed/kernel' of 'model.predict' was built under "
                                               r"flow.scope.placement on devices 0:1: expected the consistent view"):
        model.predict(X, verbose=0)


def test_a_keras_model_with_placed_layers_trains_to_one_device_weights():
    """The Keras face: layers built under placements; compile's loss and metrics run where the output is."""
    results = []
    for devices in (1, 2):
        flow.config.set_view("consistent")
        flow.config.gpu_device_num(devices)
        flow.clear_session()
        flow.config.set_seed(2)
        x = flow.Input((6,))
        with flow.scope.placement("cpu", "0:0"):
            h = flow.layers.Dense(16, activation="relu", kernel_regularizer=flow.regularizers.L2(0.01))(x)
        with flow.scope.placement("cpu", "0:1" if devices == 2 else "0:0"):
            y = flow.layers.Dense(3)(h)
        model = flow.Model(x, y)
        model.compile(flow.optimizers.Adam(0.01), flow.losses.SparseCategoricalCrossentropy(from_logits=True),
                      metrics=["accuracy"])
        if devices == 2 and not runs_placements_on_some_devices():
            with placement_refused("variable 'dense/kernel'", "model.train", "0:0"):
                model.fit(X, Y, batch_size=4, epochs=2, shuffle=False, verbose=0)
            return
        history = model.fit(X, Y, batch_size=4, epochs=2, shuffle=False, verbose=0).history
        results.append((history, model.get_weights()))
    (h1, w1), (h2, w2) = results
    np.testing.assert_allclose(h2["loss"], h1["loss"], rtol=1e-6)
    assert h2["accuracy"] == h1["accuracy"]
    for a, b in zip(w1, w2):
        np.testing.assert_allclose(b, a, atol=1e-6)


def test_placements_feeding_each_other_in_a_cycle_are_refused():
    flow.config.set_view("consistent")
    flow.config.gpu_device_num(2)
    flow.clear_default_session()

    @flow.global_function(type="train")
    def train_job(x: tp.Numpy.Placeholder((8, 6)), y: tp.Numpy.Placeholder((8,), dtype=flow.int32)) -> tp.Numpy:
        with flow.scope.placement("cpu", "0:0"):
            h = flow.layers.dense(x, 16, activation=flow.nn.relu, name="hidden")
        with flow.scope.placement("cpu", "0:1"):
            h = flow.layers.dense(h, 16, activation=flow.nn.relu, name="middle")
        with flow.scope.placement("cpu", "0:0"):
            loss = flow.nn.sparse_softmax_cross_entropy_with_logits(y, flow.layers.dense(h, 3, name="output"))
        flow.optimizer.SGD(flow.optimizer.PiecewiseConstantScheduler([], [0.1])).minimize(loss)
        return loss

    with refusal("variable 'hidden/kernel'", "train_job", "0:0",
                 r"tensors of 'train_job' go around the placements devices 0:0 -> devices 0:1 -> devices 0:0"):
        train_job(X, Y)
