"""OneFlow's ``flow.scope.placement`` on some of the devices, in the consistent view: the ops and variables built
inside run on those devices only (each Blob whole on each of them), the tensors crossing between placements are
copied (forward and backward) and listed by ``parallel_plan()``, and training equals one device.  What the
engine cannot run is refused by name before any step.

Both backends train them: tensorflow with a DTensor mesh per placement (one step function where the tensors only
go forward from all devices into placements, else one function per stage of one placement, tensors copied between
them), jax with one program per stage of one placement, tensors copied between them (``jax.device_put``).
OneFlow's own programs put ops on all devices between and after placements (the dropout, the loss)."""
import numpy as np
import pytest

import flowlayers as flow
import flowlayers.typing as tp
from flowlayers.framework.variable import store
from places import devices_of, use

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
    use("consistent", devices)
    job = pipeline(first, second, dropout)
    losses = [job(X, Y) for _ in range(3)]
    return job, losses, {path: var.numpy() for path, var in store.variables.items()}


@pytest.mark.parametrize("devices, first, second, dropout", [
    (2, "0:0", "0:1", False), (4, "0:0-1", "0:2-3", True), (4, "0:2-3", ["0:0", "0:1"], False),
    (4, "0:3", "0:1", True)])
def test_layers_placed_on_some_devices_train_to_one_device_weights(devices, first, second, dropout):
    _, want_losses, want = train(1, None, None, dropout)
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


@pytest.mark.parametrize("devices, first, second", [(2, "0:0", "0:1"), (4, "0:3", "0:0-1"), (4, "0:0-1", "0:2")])
def test_ops_on_all_devices_after_placements_and_placements_of_different_sizes_equal_one_device(devices, first,
                                                                                                second):
    """The loss on all devices after the last placement (its tensors go back from some devices to all), between
    placements of different sizes: trained as one device trains."""
    use("consistent", 1)
    one = pipeline(None, None, dropout=True, loss_inside=False)
    want_losses = [one(X, Y) for _ in range(3)]
    want = {path: var.numpy() for path, var in store.variables.items()}
    flow.config.gpu_device_num(devices)
    job = pipeline(first, second, dropout=True, loss_inside=False)
    losses = [job(X, Y) for _ in range(3)]
    np.testing.assert_allclose(losses, want_losses, rtol=1e-6)
    for path, value in want.items():
        np.testing.assert_allclose(store.variables[path].numpy(), value, atol=1e-6, err_msg=path)
    held = {path: v.devices for path, v in job.parallel_plan().variables.items()}
    assert held["hidden/kernel"] == devices_of(first) and held["output/kernel"] == devices_of(second)


def test_a_placed_variable_is_not_split():
    use("consistent", 2, fresh=True)

    @flow.global_function(type="predict")
    def job(x: tp.Numpy.Placeholder((8, 6))) -> tp.Numpy:
        with flow.scope.placement("cpu", "0:1"):
            return flow.matmul(x, flow.get_variable("w", (6, 4), distribute=flow.distribute.split(1)))

    with pytest.raises(flow.SBPError, match=r"variable 'w': placed on devices \[1\] \(flow.scope.placement\), "
                                            r"expected no split, received flow.distribute.split\(1\)"):
        job(X)


def test_a_model_built_under_a_placement_is_refused_in_the_mirrored_view():
    use("consistent", 2)
    x = flow.Input((6,))
    with flow.scope.placement("cpu", "0:1"):
        y = flow.layers.Dense(2, name="placed")(x)
    model = flow.Model(x, y)
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
        use("consistent", devices, seed=2, fresh=True)
        x = flow.Input((6,))
        with flow.scope.placement("cpu", "0:0"):
            h = flow.layers.Dense(16, activation="relu", kernel_regularizer=flow.regularizers.L2(0.01))(x)
        with flow.scope.placement("cpu", "0:1" if devices == 2 else "0:0"):
            y = flow.layers.Dense(3)(h)
        model = flow.Model(x, y)
        model.compile(flow.optimizers.Adam(0.01), flow.losses.SparseCategoricalCrossentropy(from_logits=True),
                      metrics=["accuracy"])
        history = model.fit(X, Y, batch_size=4, epochs=2, shuffle=False, verbose=0).history
        results.append((history, model.get_weights()))
    (h1, w1), (h2, w2) = results
    np.testing.assert_allclose(h2["loss"], h1["loss"], rtol=1e-6)
    assert h2["accuracy"] == h1["accuracy"]
    for a, b in zip(w1, w2):
        np.testing.assert_allclose(b, a, atol=1e-6)


def test_placements_feeding_each_other_in_a_cycle_equal_one_device():
    """Devices 0:0 -> 0:1 -> 0:0 again (the loss on the first placement's devices)."""
    def cycle(devices):
        use("consistent", devices, seed=3, fresh=True)
        there = "0:1" if devices == 2 else "0:0"

        @flow.global_function(type="train")
        def train_job(x: tp.Numpy.Placeholder((8, 6)), y: tp.Numpy.Placeholder((8,), dtype=flow.int32)) -> tp.Numpy:
            with flow.scope.placement("cpu", "0:0"):
                h = flow.layers.dense(x, 16, activation=flow.nn.relu, name="hidden")
            with flow.scope.placement("cpu", there):
                h = flow.layers.dense(h, 16, activation=flow.nn.relu, name="middle")
            with flow.scope.placement("cpu", "0:0"):
                loss = flow.nn.sparse_softmax_cross_entropy_with_logits(y, flow.layers.dense(h, 3, name="output"))
            flow.optimizer.SGD(flow.optimizer.PiecewiseConstantScheduler([], [0.1])).minimize(loss)
            return loss

        losses = [train_job(X, Y) for _ in range(3)]
        return train_job, losses, {path: var.numpy() for path, var in store.variables.items()}

    _, want_losses, want = cycle(1)
    job, losses, got = cycle(2)
    np.testing.assert_allclose(losses, want_losses, rtol=1e-6)
    for path, value in want.items():
        np.testing.assert_allclose(got[path], value, atol=1e-6, err_msg=path)
    assert job.parallel_plan().variables["middle/kernel"].devices == (1,)


def placed_then_all(devices, optimizer):
    """A Keras model whose output layer runs on all devices after a layer placed on device 0 (its step runs stage
    by stage on both backends)."""
    use("consistent", devices, seed=4, fresh=True)
    x = flow.Input((6,))
    with flow.scope.placement("cpu", "0:0"):
        h = flow.layers.Dense(16, activation="relu", name="placed")(x)
    model = flow.Model(x, flow.layers.Dense(3, name="after")(h))
    model.compile(optimizer, flow.losses.SparseCategoricalCrossentropy(from_logits=True))
    return model


def test_a_step_run_stage_by_stage_refuses_a_loss_scale_and_the_model_stays_usable():
    """A loss scale's rule needs every gradient at once (whether all are finite); the stages' rules run per device
    set: refused by name before any step, and the model trains once compiled with another optimizer."""
    model = placed_then_all(2, flow.optimizers.LossScaleOptimizer(flow.optimizers.SGD(0.1)))
    with pytest.raises(flow.ConfigError, match=r"is placed on devices 0:0.*expected an optimizer .*loss scale"):
        model.fit(X, Y, batch_size=4, epochs=1, shuffle=False, verbose=0)
    before = model.get_weights()
    model.compile(flow.optimizers.SGD(0.1), flow.losses.SparseCategoricalCrossentropy(from_logits=True))
    model.fit(X, Y, batch_size=4, epochs=1, shuffle=False, verbose=0)
    assert not np.allclose(model.get_weights()[0], before[0])


def test_global_clipnorm_in_a_step_run_stage_by_stage():
    """jax runs the rule per device set and refuses a norm over every gradient by name; tensorflow's rule runs on
    every device's blocks with the whole gradients' norms, as one device clips."""
    one = placed_then_all(1, flow.optimizers.SGD(0.5, global_clipnorm=0.1))
    one.fit(X, Y, batch_size=4, epochs=2, shuffle=False, verbose=0)
    want = one.get_weights()
    model = placed_then_all(2, flow.optimizers.SGD(0.5, global_clipnorm=0.1))
    if flow.config.backend_name() == "jax":
        with pytest.raises(flow.ConfigError, match=r"is placed on devices 0:0; expected an optimizer whose rule runs "
                                                   r"on each device set alone, received one with global_clipnorm"):
            model.fit(X, Y, batch_size=4, epochs=2, shuffle=False, verbose=0)
        return
    model.fit(X, Y, batch_size=4, epochs=2, shuffle=False, verbose=0)
    for a, b in zip(model.get_weights(), want):
        np.testing.assert_allclose(a, b, atol=1e-6)


@pytest.mark.jax_backend     # compiled_text is the jax backend's (shows_program)
def test_the_program_of_a_step_run_stage_by_stage_is_refused_on_jax():
    model = placed_then_all(2, flow.optimizers.SGD(0.1))
    with pytest.raises(flow.ConfigError, match=r"expected a step compiled as one program, received one with "
                                               r"placements on some devices"):
        model.parallel_plan(batch_size=4).compiled_program()


def test_watch_diff_in_a_step_run_stage_by_stage_equals_one_device():
    """flow.watch_diff of a Blob made inside a placement, read by the next placement and by an op on all devices:
    its gradient sums both uses, as on one device; and of a Blob made from the batch alone (its stage has no
    variable to differentiate)."""
    seen = {1: [], 2: []}
    scaled_seen = {1: [], 2: []}
    for devices in (1, 2):
        use("consistent", devices, seed=5, fresh=True)

        @flow.global_function(type="train")
        def train_job(x: tp.Numpy.Placeholder((8, 6)), y: tp.Numpy.Placeholder((8,), dtype=flow.int32)) -> tp.Numpy:
            with flow.scope.placement("cpu", "0:1" if devices == 2 else "0:0"):
                scaled = x * 2.0
            with flow.scope.placement("cpu", "0:0"):
                h = flow.layers.dense(scaled, 16, activation=flow.nn.relu, name="hidden")
            with flow.scope.placement("cpu", "0:1" if devices == 2 else "0:0"):
                logits = flow.layers.dense(h, 3, name="output")
            loss = flow.nn.sparse_softmax_cross_entropy_with_logits(y, logits) + flow.math.reduce_mean(h * h, axis=1)
            flow.watch_diff(h, lambda value, devices=devices: seen[devices].append(value))
            flow.watch_diff(scaled, lambda value, devices=devices: scaled_seen[devices].append(value))
            flow.optimizer.SGD(flow.optimizer.PiecewiseConstantScheduler([], [0.1])).minimize(loss)
            return loss

        for _ in range(2):
            train_job(X, Y)
    assert len(seen[2]) == 2 and seen[2][0].shape == (8, 16)
    for got, want in zip(seen[2] + scaled_seen[2], seen[1] + scaled_seen[1]):
        np.testing.assert_allclose(got, want, atol=1e-6)
    assert np.abs(seen[2][0]).max() > 0 and np.abs(scaled_seen[2][0]).max() > 0 and len(scaled_seen[2]) == 2


@pytest.mark.parametrize("micro_batches, normalized", [(2, False), (1, True)], ids=["micro-batches", "batch-norm"])
def test_a_step_run_stage_by_stage_over_micro_batches_or_with_state_updates_equals_one_device(micro_batches,
                                                                                             normalized):
    """The stages run once per micro-batch, the gradients summed before one update; a batch normalization on all
    devices after the placement updates its moving statistics where they live."""
    weights = []
    for devices in (1, 2):
        use("consistent", devices, seed=6, fresh=True)
        x = flow.Input((6,))
        with flow.scope.placement("cpu", "0:0"):
            h = flow.layers.Dense(16, activation="relu", name="placed")(x)
        if normalized:
            h = flow.layers.BatchNormalization(name="bn")(h)
        model = flow.Model(x, flow.layers.Dense(3, name="after")(h))
        model.compile(flow.optimizers.Adam(0.01), flow.losses.SparseCategoricalCrossentropy(from_logits=True),
                      micro_batches=micro_batches)
        model.fit(X, Y, batch_size=8, epochs=3, shuffle=False, verbose=0)
        weights.append(dict(zip([w.path for w in model.weights], model.get_weights())))
    for path, value in weights[0].items():
        np.testing.assert_allclose(weights[1][path], value, atol=1e-5, err_msg=path)
    if normalized:      # the moving statistics moved
        assert not np.allclose(weights[1]["bn/moving_mean"], 0.0), list(weights[1])
