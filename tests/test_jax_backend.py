"""The jax backend's own behaviour, beyond what the whole suite checks on every backend."""
import os
import subprocess
import sys
from pathlib import Path

import pytest

import flowlayers as flow

pytestmark = pytest.mark.jax_backend

PROGRAMS = Path(__file__).resolve().parent / "checkpoint_programs"


@pytest.mark.parametrize("view", ["consistent", "mirrored"])
@pytest.mark.slow
def test_steps_dispatched_ahead_on_several_cpu_devices_finish(view):
    """Two steps with all-reduces in flight at once deadlocked XLA:CPU on 4 logical devices and 2 cores (the
    process aborted after 40 s); a step now waits for the one before it."""
    done = subprocess.run([sys.executable, str(PROGRAMS / "steps_in_flight.py"), "jax", view], capture_output=True,
                          text=True, timeout=240, env=dict(os.environ, XLA_FLAGS=""))
    assert done.returncode == 0, done.stderr[-2000:]
    assert "trained 62 steps" in done.stdout


def _step_page_faults(**env):
    done = subprocess.run([sys.executable, str(PROGRAMS / "step_page_faults.py"), "consistent"], capture_output=True,
                          text=True, timeout=240, env=dict(os.environ, XLA_FLAGS="", **env))
    assert done.returncode == 0, done.stderr[-2000:]
    line = done.stdout.strip().splitlines()[-1]     # page faults per step F, kept K, loss L
    faults, kept, loss = (part.split()[-1] for part in line.split(", "))
    return float(faults), kept, loss


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's malloc")
@pytest.mark.slow
def test_cpu_steps_reuse_their_buffers_and_the_setting_can_be_refused():
    """XLA:CPU mallocs each step's temporary buffers (about 6,000 pages per device for this LeNet) and frees them:
    with glibc's defaults most processes faulted 7,000-8,000 pages in per step again (15-25 steps/s from one
    process to the next, bench/RESULTS_jax_heap.md); host_heap.keep() makes glibc keep them.
    FLOWLAYERS_KEEP_HOST_HEAP=0 leaves glibc as it was, and training computes the same either way."""
    faults, kept, loss = _step_page_faults()
    assert kept == "True" and faults < 2000
    _, kept_off, loss_off = _step_page_faults(FLOWLAYERS_KEEP_HOST_HEAP="0")
    assert kept_off == "False" and loss_off == loss


def _running_steps(sums):
    """Each step's pending sums as ``_counted`` leaves them: per output its sum and the running totals (float64, on
    the device) before and after the step."""
    import jax.numpy as jnp
    from flowlayers.contract import Pending
    from flowlayers_jax.executable import RUNNING_TOTALS

    running = [jnp.zeros(sums.shape[1], jnp.float64)]
    for s in sums:
        running.append(running[-1] + jnp.asarray(s, jnp.float64))
    return [[Pending((running[i], running[i + 1], k, jnp.asarray(sums[i, k])), RUNNING_TOTALS)
             for k in range(sums.shape[1])]
            for i in range(len(sums))]


def test_a_steps_pending_sums_read_as_its_sums():
    import numpy as np
    from flowlayers import contract

    sums = np.random.default_rng(0).normal(size=(5, 2)).astype(np.float32) * 100
    steps = _running_steps(sums)
    assert float(steps[3][1]) == sums[3, 1]
    read = contract.read_all([steps[i][k] for i in range(5) for k in range(2)] + [np.float32(7.0)])
    np.testing.assert_array_equal(read[:-1], sums.ravel())
    assert read[-1] == 7.0



def test_a_pending_sum_refuses_to_be_read_without_a_copy():
    import numpy as np

    pending = _running_steps(np.array([[2.5]], np.float32))[0][0]
    with pytest.raises(ValueError, match="Pending sum.*copy=False"):
        np.asarray(pending, copy=False)
    assert np.asarray(pending, copy=True) == 2.5 and np.asarray(pending, np.float64).dtype == np.float64

def test_the_total_of_a_run_of_steps_takes_two_reads_and_a_gap_or_another_output_starts_a_new_run(monkeypatch):
    import jax
    import numpy as np
    from flowlayers import contract

    sums = np.random.default_rng(1).normal(size=(8, 2)).astype(np.float32)
    steps = _running_steps(sums)
    reads, device_get = [], jax.device_get
    monkeypatch.setattr(jax, "device_get", lambda arrays: reads.append(len(arrays)) or device_get(arrays))
    exact = sums.astype(np.float64)

    assert abs(contract.total([s[0] for s in steps]) - exact[:, 0].sum()) < 1e-12
    assert reads == [2]
    gapped = [0, 1, 2, 5, 6]
    assert abs(contract.total([steps[i][1] for i in gapped]) - exact[gapped, 1].sum()) < 1e-12
    assert reads[1:] == [4]
    mixed = [steps[0][0], steps[1][1], steps[2][1], np.float32(0.5)]
    assert abs(contract.total(mixed) - (exact[0, 0] + exact[1, 1] + exact[2, 1] + 0.5)) < 1e-12


@pytest.mark.parametrize("view", ["consistent", "mirrored"])
@pytest.mark.parametrize("one_hot", [False, True])
def test_steps_fed_as_rows_kept_on_the_devices_train_as_steps_fed_their_rows(view, one_hot):
    """On a GPU ``fit`` hands a step the numbers of its rows of the training arrays, kept on the devices
    (``takes_rows``); here on CPU devices that path, forced, matches the one that feeds the rows, epoch
    losses, a last smaller batch, the evaluation and the weights.  Inputs and labels share their rows' numbers,
    whatever their rank (one-hot labels: a matrix)."""
    import numpy as np

    rng = np.random.default_rng(3)
    x, y = rng.normal(size=(70, 12)).astype("float32"), rng.integers(0, 4, 70).astype("int32")
    if one_hot:
        y = np.eye(4, dtype="float32")[y]
    flow.config.set_view(view)
    runs = []
    for takes_rows in (False, True):
        flow.clear_session()
        flow.config.set_seed(5)
        inputs = flow.Input((12,))
        model = flow.Model(inputs, flow.layers.Dense(4)(flow.layers.Dense(16, activation="relu")(inputs)))
        model.compile(flow.optimizers.SGD(0.1, momentum=0.9),
                      (flow.losses.CategoricalCrossentropy if one_hot else flow.losses.SparseCategoricalCrossentropy)(
                          from_logits=True),
                      metrics=["accuracy"])
        asked, stepped = [], []     # the rows each step asked about; the steps run through ``steps``
        for phase in ("train", "eval"):
            executable = model.trainer.step(phase).executable
            assert executable.takes_rows(1 << 20, [x, y]) is False       # CPU devices read the rows where they are
            executable.takes_rows = lambda rows, sources, takes=takes_rows: asked.append(rows) or takes
            executable.steps = lambda *args, run=executable.steps: stepped.append(len(args[2])) or run(*args)
        history = model.fit(x, y, batch_size=16, epochs=3, shuffle=True, verbose=0)
        assert asked == [16, 16, 16, 16, 6] * 3
        assert stepped == ([1] * 15 if takes_rows else [])
        model.train_on_batch(x[:8], y[:8])      # rows of no whole array: fed, whatever takes_rows says
        assert len(stepped) == (15 if takes_rows else 0)
        runs.append((history.history, model.evaluate(x, y, batch_size=16, verbose=0),
                     [np.asarray(w) for w in model.get_weights()]))
    (fed, fed_eval, fed_w), (rows, rows_eval, rows_w) = runs
    for name in ("loss", "accuracy"):
        np.testing.assert_allclose(rows[name], fed[name], rtol=1e-5)
    np.testing.assert_allclose(rows_eval, fed_eval, rtol=1e-5)
    for a, b in zip(rows_w, fed_w):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("view", ["consistent", "mirrored"])
@pytest.mark.parametrize("shuffle", [False, True])
@pytest.mark.parametrize("steps_per_execution", [1, 2])
def test_steps_that_run_through_an_epoch_make_their_rows_on_the_devices_and_transfer_nothing(
        view, shuffle, steps_per_execution):
    """Steps taking rows of the training arrays kept on the devices make their rows' numbers there, from the epoch's
    order kept there too and the first row the steps before computed: an epoch transfers its first row's number
    and its order (shuffled), and nothing else, step after step and group after group (a last smaller batch
    too)."""
    import jax
    import numpy as np

    rng = np.random.default_rng(4)
    x, y = rng.normal(size=(72, 12)).astype("float32"), rng.integers(0, 4, 72).astype("int32")
    flow.config.set_view(view)
    inputs = flow.Input((12,))
    model = flow.Model(inputs, flow.layers.Dense(4)(inputs))
    model.compile(flow.optimizers.SGD(0.1, momentum=0.9), flow.losses.SparseCategoricalCrossentropy(from_logits=True),
                  steps_per_execution=steps_per_execution)
    executable = model.trainer.step("train").executable
    executable.takes_rows = lambda rows, sources: True      # what a GPU does; a CPU is fed rows step by step
    runtime, put = executable.runtime, executable.runtime.put
    model.fit(x, y, batch_size=16, epochs=1, shuffle=shuffle, verbose=0)     # 4 batches of 16, one of 8
    sent, host_args = [], []
    runtime.put = lambda value, sharding: sent.append((np.shape(value), np.asarray(value).dtype)) or put(value,
                                                                                                     sharding)
    run = executable._run
    executable._run = lambda fn, *args: host_args.extend(
        a for a in jax.tree.leaves(args) if not isinstance(a, jax.Array)) or run(fn, *args)
    try:
        history = model.fit(x, y, batch_size=16, epochs=3, shuffle=shuffle, verbose=0)
        each_epoch = ([((72,), np.dtype("int64"))] if shuffle else []) + [((), np.dtype("int32"))]
        assert sent == each_epoch * 3
        assert host_args == []      # nothing else the steps take comes from the host
        assert np.all(np.isfinite(history.history["loss"]))
    finally:
        runtime.put = put
        del executable._run


def test_rows_of_runs_from_different_rows_in_one_call_train_as_the_rows_fed():
    """Each input's Rows a run of its own order from its own first row: one is made on the devices, the other
    sent as row numbers, and the steps train as if fed the rows."""
    import numpy as np

    from flowlayers import contract

    rng = np.random.default_rng(6)
    x, y = rng.normal(size=(64, 12)).astype("float32"), rng.integers(0, 4, 64).astype("int32")
    order = rng.permutation(64)
    flow.config.set_view("consistent")
    inputs = flow.Input((12,))
    model = flow.Model(inputs, flow.layers.Dense(4)(inputs))
    model.compile(flow.optimizers.SGD(0.1), flow.losses.SparseCategoricalCrossentropy(from_logits=True))  # no slots
    step, start = model.trainer.step("train"), model.get_weights()
    x_rows, y_rows = order[8:40].reshape(2, 16), np.arange(24, 56).reshape(2, 16)
    runs = [contract.Rows(x, x_rows, order, 8), contract.Rows(y, y_rows, None, 24)]
    by_runs = step.executable.steps(runs, step.handles(), [0.1, 0.1], 1)
    runs_w = model.get_weights()
    model.set_weights(start)
    fed = step.executable.steps([x[x_rows], y[y_rows]], step.handles(), [0.1, 0.1], 1)
    np.testing.assert_allclose(np.asarray(by_runs[0]), np.asarray(fed[0]), rtol=1e-6)
    for a, b in zip(runs_w, model.get_weights()):
        np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-7)


def test_a_sum_that_was_not_finite_leaves_the_totals_of_later_runs_as_their_own_sums():
    """The running totals keep a NaN or inf sum of any step before; a later run's total is still its own."""
    import numpy as np
    from flowlayers import contract

    sums = np.arange(1, 13, dtype=np.float32).reshape(6, 2)
    sums[2, 0], sums[3, 1] = np.nan, np.inf
    steps = _running_steps(sums)
    assert contract.total([s[0] for s in steps[3:]]) == sums[3:, 0].sum()
    assert contract.total([s[1] for s in steps[4:]]) == sums[4:, 1].sum()
    assert np.isnan(contract.total([s[0] for s in steps]))
    assert contract.total([s[1] for s in steps[:5]]) == np.inf


def test_a_gpu_step_gathers_its_rows_on_the_device_and_a_cpu_step_never():
    from flowlayers_jax.rows import gathers_rows

    assert gathers_rows("gpu", True) and gathers_rows("tpu", True) and not gathers_rows("cpu", True)
    assert not gathers_rows("gpu", False)      # arrays too large to keep on the devices: fed


def test_training_arrays_up_to_a_gibibyte_are_kept_on_the_devices():
    import numpy as np

    flow.config.set_view("consistent")
    inputs = flow.Input((4,))
    model = flow.Model(inputs, flow.layers.Dense(2)(inputs))
    model.compile(flow.optimizers.SGD(0.1), "mse")
    runtime = model.trainer.step("train").runtime
    whole = np.zeros(1, np.float32)
    assert runtime.stages(np.broadcast_to(whole, (1 << 28,)))          # 1 GiB exactly
    assert not runtime.stages(np.broadcast_to(whole, ((1 << 28) + 1,)))
    assert runtime.stage(np.broadcast_to(whole, ((1 << 28) + 1,))) is None


def _matmul_node(ta, tb):
    import types
    return types.SimpleNamespace(attrs={"transpose_a": ta, "transpose_b": tb})


@pytest.mark.parametrize("a_shape, b_shape", [((3, 4), (4, 5)), ((2, 3, 4), (4, 5)), ((2, 2, 3, 4), (4, 5)),
                                              ((2, 3, 4), (2, 4, 5))])
@pytest.mark.parametrize("ta, tb", [(False, False), (True, False), (False, True), (True, True)])
def test_matmul_gradients_in_every_layout_match_numpy_float64(a_shape, b_shape, ta, tb):
    import jax
    import numpy as np
    from flowlayers_jax.kernels.matmul import matmul

    rng = np.random.default_rng(0)
    a_math, b_math = rng.normal(size=a_shape), rng.normal(size=b_shape)      # as multiplied
    a = np.swapaxes(a_math, -1, -2).copy() if ta else a_math                 # as stored
    b = np.swapaxes(b_math, -1, -2).copy() if tb else b_math
    w = rng.normal(size=a_shape[:-1] + b_shape[-1:])
    ga, gb = jax.grad(lambda a, b: (matmul(_matmul_node(ta, tb), a, b, ctx=None) * w).sum(), (0, 1))(a, b)
    want_a = w @ np.swapaxes(b_math, -1, -2)
    want_b = np.swapaxes(a_math, -1, -2) @ w
    if len(b_shape) == 2:
        want_b = want_b.reshape((-1,) + want_b.shape[-2:]).sum(0)
    np.testing.assert_allclose(ga, np.swapaxes(want_a, -1, -2) if ta else want_a, rtol=1e-12)
    np.testing.assert_allclose(gb, np.swapaxes(want_b, -1, -2) if tb else want_b, rtol=1e-12)


def test_a_kernel_gradient_all_reduced_over_a_batch_split_is_not_transposed_after():
    """With the rows split over ``data``, the kernel's gradient is partial per device and all-reduced: JAX's own rule
    computed it transposed, and each step then copied it through a transpose (XLA:CPU, 2 devices: 21 steps/s
    against 29 for the 1024-wide MLP)."""
    import re

    import jax
    import numpy as np
    from jax.sharding import Mesh, NamedSharding, PartitionSpec
    from flowlayers_jax.kernels.matmul import matmul

    mesh = Mesh(np.array(jax.devices()[:2]), ("data",))
    x = jax.device_put(np.ones((16, 48), np.float32), NamedSharding(mesh, PartitionSpec("data")))
    k = jax.device_put(np.ones((48, 32), np.float32), NamedSharding(mesh, PartitionSpec()))
    grad = jax.jit(jax.grad(lambda k, x: matmul(_matmul_node(False, False), x, k, ctx=None).sum()),
                   out_shardings=NamedSharding(mesh, PartitionSpec()))
    hlo = grad.lower(k, x).compile().as_text()
    assert "all-reduce" in hlo
    assert not re.search(r"f32\[32,48\]", hlo), "the kernel's gradient was computed transposed"


@pytest.mark.parametrize("equation", ["btd,dhk->bthk", "bthk,dhk->btd", "aecd,abcd->acbe", "acbe,aecd->abcd",
                                      "ab,bc->ca", "ab,bc->a", "ab,cd->abcd", "ab,ab->", "abc,b->ac", "ab,c->ac"])
def test_einsum_gradients_match_numpy_float64(equation):
    """Each operand's gradient, against numpy's einsum of the output's weights with the other operand (a ones
    operand supplies letters of the operand alone, along which its gradient is the same)."""
    import types

    import jax
    import numpy as np
    from flowlayers_jax.kernels.einsum import einsum

    rng = np.random.default_rng(0)
    size = dict(zip("abcdehkt", [2, 3, 4, 5, 3, 2, 3, 4]))
    (ta, tb), out = equation.split("->")[0].split(","), equation.split("->")[1]
    a, b = rng.normal(size=[size[c] for c in ta]), rng.normal(size=[size[c] for c in tb])
    w = rng.normal(size=[size[c] for c in out])
    node = types.SimpleNamespace(attrs={"equation": equation})
    grads = jax.grad(lambda a, b: (einsum(node, a, b, ctx=None) * w).sum(), (0, 1))(a, b)
    for got, target, other, o_terms in zip(grads, (ta, tb), (b, a), (tb, ta)):
        alone = "".join(c for c in target if c not in out + o_terms)
        ones = np.ones([size[c] for c in alone])
        want = np.einsum(f"{out},{o_terms},{alone}->{target}", w, other, ones)
        np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)


def test_an_einsum_kernel_gradient_all_reduced_over_a_batch_split_is_not_transposed_after():
    import re
    import types

    import jax
    import numpy as np
    from jax.sharding import Mesh, NamedSharding, PartitionSpec
    from flowlayers_jax.kernels.einsum import einsum

    mesh = Mesh(np.array(jax.devices()[:2]), ("data",))
    x = jax.device_put(np.ones((8, 16, 64), np.float32), NamedSharding(mesh, PartitionSpec("data")))
    k = jax.device_put(np.ones((64, 4, 24), np.float32), NamedSharding(mesh, PartitionSpec()))
    node = types.SimpleNamespace(attrs={"equation": "btd,dhk->bthk"})
    grad = jax.jit(jax.grad(lambda k, x: einsum(node, x, k, ctx=None).sum()),
                   out_shardings=NamedSharding(mesh, PartitionSpec()))
    hlo = grad.lower(k, x).compile().as_text()
    reduced = re.search(r"= (f32\[[0-9,]*\])\{[0-9,]*\} all-reduce\(", hlo)
    assert reduced and reduced.group(1) == "f32[64,4,24]", "the kernel's gradient was all-reduced in another layout"
    assert "transpose_copy_fusion" not in hlo


def test_a_truncated_normal_draw_lies_within_two_standard_deviations_with_that_laws_spread():
    """TensorFlow's truncated normal (what flow.truncated_normal means): redrawn beyond 2 standard deviations; its
    standard deviation is then stddev * sqrt(1 - 4 phi(2) / (Phi(2) - Phi(-2))), from the normal law in float64."""
    import math

    import numpy as np

    inputs = flow.Input((250,))
    model = flow.Model(inputs, flow.layers.Dense(400, kernel_initializer=flow.truncated_normal(0.5),
                                                 name="out")(inputs))
    kernel = model.get_weights()[0].astype(np.float64)
    phi, mass = math.exp(-2.0) / math.sqrt(2 * math.pi), math.erf(2 / math.sqrt(2))
    spread = 0.5 * math.sqrt(1 - 4 * phi / mass)
    assert np.abs(kernel).max() <= 1.0 and np.abs(kernel).max() > 0.99
    assert abs(kernel.mean()) < 0.01 and kernel.std() == pytest.approx(spread, rel=0.01)
