"""``compile(steps_per_execution=K)``: K batches per engine call (the jax backend scans them, gathering a training
array's rows on the devices; others run them one by one), with the weights, metrics and history of K = 1; batch
hooks once per group, after its last batch, as Keras calls them; metrics read on the host only where read."""
import numpy as np
import pytest

import flowlayers as flow
from flowlayers import backend_common, contract
from flowlayers.framework.compiled import Compiled
from places import consistent, use

RNG = np.random.default_rng(3)
X = RNG.normal(size=(150, 12)).astype(np.float32)
Y = RNG.integers(0, 4, 150)


def train(spe, view="consistent", n=2, callbacks=(), rate=0.1, **fit):
    use(view, n, {"data": n} if view == "consistent" and n > 1 else None, seed=0, fresh=True)
    x = flow.Input((12,))
    h = flow.layers.Dense(16, activation="relu", name="hidden")(x)
    model = flow.Model(x, flow.layers.Dense(4, name="out")(h))
    model.compile(flow.optimizers.SGD(rate, momentum=0.9), flow.losses.SparseCategoricalCrossentropy(from_logits=True),
                  metrics=["accuracy"], steps_per_execution=spe)
    history = model.fit(X, Y, batch_size=32, verbose=0, callbacks=list(callbacks), **{"epochs": 3, **fit})
    return model, history


@pytest.mark.parametrize("view, n", [("consistent", 1), ("consistent", 2), ("mirrored", 2), ("mirrored", 4)])
def test_groups_of_steps_train_as_single_steps(view, n):
    one, h1 = train(1, view, n, shuffle=True)
    four, h4 = train(4, view, n, shuffle=True)       # 5 batches an epoch: a group of 4, then the last (22 rows)
    assert one.optimizer.iterations == four.optimizer.iterations == 15
    for a, b in zip(one.get_weights(), four.get_weights()):
        np.testing.assert_allclose(a, b, atol=1e-6)
    _, reference = train(1, "consistent", 1, shuffle=True)       # one device: what every view must report
    for key in ("loss", "accuracy"):
        assert all(isinstance(v, float) for v in h4.history[key])
        np.testing.assert_allclose(h1.history[key], h4.history[key], atol=1e-6)
        np.testing.assert_allclose(h4.history[key], reference.history[key], atol=1e-5)


@pytest.mark.parametrize("view, n", [("consistent", 2), ("mirrored", 2)])
def test_the_steps_after_a_group_take_the_numbers_single_steps_take(view, n):
    """Adam's bias correction and dropout's draws depend on the step's number: the group's steps and those after
    it (the epoch's last, smaller batch alone, then the next epoch) are numbered as single steps are."""
    runs = []
    for spe in (1, 4):
        use(view, n, {"data": n} if view == "consistent" else None, seed=7, fresh=True)
        x = flow.Input((12,))
        h = flow.layers.Dropout(0.3)(flow.layers.Dense(16, activation="relu", name="hidden")(x))
        model = flow.Model(x, flow.layers.Dense(4, name="out")(h))
        model.compile(flow.optimizers.Adam(0.01), flow.losses.SparseCategoricalCrossentropy(from_logits=True),
                      steps_per_execution=spe)
        model.fit(X, Y, batch_size=32, epochs=3, shuffle=True, verbose=0)
        runs.append(model.get_weights())
    for a, b in zip(*runs):
        np.testing.assert_allclose(a, b, atol=1e-6)


@pytest.mark.parametrize("view, n", [("consistent", 2), ("mirrored", 2)])
def test_each_step_of_a_group_takes_its_own_scheduled_rate(view, n):
    """A rate that changes inside a group (after steps 3 and 7 of 15) reaches each of the group's steps as it
    reaches single steps: the same weights as K = 1, and not those of the group's first rate for all its steps."""
    rate = flow.optimizer.PiecewiseConstantScheduler([3, 7], [0.1, 0.03, 0.01])
    one, _ = train(1, view, n, rate=rate)
    four, _ = train(4, view, n, rate=rate)
    for a, b in zip(one.get_weights(), four.get_weights()):
        np.testing.assert_allclose(a, b, atol=1e-6)
    assert [four.optimizer.learning_rate_at(i) for i in (2, 3, 6, 7)] == [0.1, 0.03, 0.03, 0.01]
    flat, _ = train(4, view, n, rate=0.1)
    assert max(np.abs(a - b).max() for a, b in zip(flat.get_weights(), four.get_weights())) > 1e-3


def test_batch_hooks_run_once_per_group_with_its_last_batch_and_read_logs():
    class Seen(flow.callbacks.Callback):
        def __init__(self):
            super().__init__()
            self.begins, self.ends = [], []

        def on_train_batch_begin(self, batch, logs=None):
            self.begins.append(batch)

        def on_train_batch_end(self, batch, logs=None):
            self.ends.append((batch, logs["loss"]))

    seen = Seen()
    model, history = train(2, callbacks=[seen], epochs=1)
    assert seen.begins == [0, 2, 4] and [b for b, _ in seen.ends] == [1, 3, 4]
    assert all(isinstance(loss, float) and loss > 0 for _, loss in seen.ends)
    assert seen.ends[-1][1] == pytest.approx(history.history["loss"][0])


def test_history_keeps_epoch_values_unread_until_read():
    _, history = train(1, epochs=2)
    kept = history._history["loss"]
    assert len(kept) == 2
    values = history.history["loss"]
    assert all(type(v) is float for v in values) and values[1] < values[0]


@pytest.mark.parametrize("bad", [0, -1, 2.0, True, "auto"])
def test_steps_per_execution_must_be_a_positive_int(bad):
    flow.clear_session()
    x = flow.Input((3,))
    model = flow.Model(x, flow.layers.Dense(2)(x))
    with pytest.raises(flow.InputError, match=r"steps_per_execution expected a positive int, received"):
        model.compile("sgd", "mse", steps_per_execution=bad)
    model.compile("sgd", "mse", steps_per_execution=3)      # the model stays usable
    assert model.steps_per_execution == 3


def test_rows_of_a_whole_array_run_step_by_step_where_an_engine_has_no_scan():
    consistent(1)
    x = flow.Input((12,))
    model = flow.Model(x, flow.layers.Dense(4, name="out")(x))
    model.compile(flow.optimizers.SGD(0.1), flow.losses.SparseCategoricalCrossentropy(from_logits=True))
    start = model.get_weights()
    step = model.trainer.step("train")
    index = np.arange(64).reshape(2, 32)[:, ::-1]
    feeds = [contract.Rows(X, index), contract.Rows(Y.astype(np.int32), index)]
    stacked = backend_common.step_by_step(step.executable, feeds, step.handles(), [0.1, 0.1], 1)
    by_steps = model.get_weights()
    model.set_weights(start)
    for k in range(2):
        loss, = step([X[index[k]], Y[index[k]].astype(np.int32)], 0.1, k + 1)
        np.testing.assert_allclose(float(stacked[0][k]), float(loss), rtol=1e-6)
    for a, b in zip(by_steps, model.get_weights()):
        np.testing.assert_allclose(a, b, atol=1e-7)


def test_backup_every_n_steps_is_written_when_a_group_passes_a_multiple(tmp_path):
    """Groups of 4 steps end at steps 4 and 5 of a 5-batch epoch: save_freq=3 is passed at step 4, never hit."""
    from flowlayers.framework import checkpoint_format

    backup = flow.callbacks.BackupAndRestore(tmp_path / "backup", save_freq=3, delete_checkpoint=False)
    model, _ = train(4, callbacks=[backup], epochs=1)
    assert model.optimizer.iterations == 5
    saved = checkpoint_format.Reader(str(tmp_path / "backup" / "latest")).state["position"]
    assert (saved["epoch"], saved["batch"]) == (0, 4)


@pytest.mark.parametrize("shuffle", [False, True])
def test_a_group_of_fit_batches_reaches_the_engine_as_a_run_through_the_epochs_order(monkeypatch, shuffle):
    """``Rows.start``: a group's rows are ``order[start:start + index.size]`` (no order: the rows in their order),
    which an engine may rebuild on its devices from ``start``; the groups of an epoch follow each other."""
    handed = []
    run_steps = Compiled.run_steps
    monkeypatch.setattr(Compiled, "run_steps", lambda step, feeds, *a: handed.append(feeds) or run_steps(step, feeds, *a))
    train(2, epochs=2, shuffle=shuffle)      # 150 rows of batches of 32: groups of 2, 2, then 22 rows alone
    assert len(handed) == 4
    for k, feeds in enumerate(handed):
        x, y = feeds
        assert x.source is X and x.index is y.index and x.start == y.start == [0, 64][k % 2]
        order = np.arange(150) if x.order is None else x.order
        assert (x.order is not None) == shuffle
        np.testing.assert_array_equal(x.index.ravel(), order[x.start:x.start + x.index.size])
        np.testing.assert_array_equal(x.gather(), X[order[x.start:x.start + x.index.size]].reshape(
            x.index.shape + (12,)))


def test_batches_that_do_not_follow_each_other_in_one_order_are_no_run():
    from flowlayers.models import data_adapter as da

    order = np.random.default_rng(0).permutation(10)
    batches = list(da.batches([np.arange(10.0)], 3, order))
    assert da.run_start(batches[1:3]) == 3
    assert da.run_start([batches[0], batches[2]]) is None
    other = list(da.batches([np.arange(10.0)], 3, order.copy()))
    assert da.run_start([batches[0], other[1]]) is None       # another order, though equal
    np.testing.assert_array_equal(da.run_index(order, 3, batches[1:3]), order[3:9].reshape(2, 3))
    np.testing.assert_array_equal(da.run_index(None, 3, batches[1:3]), np.arange(3, 9).reshape(2, 3))
    np.testing.assert_array_equal(da.run_index(order, 9, batches[3:]), order[9:].reshape(1, 1))  # the last, alone
