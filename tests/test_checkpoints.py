"""Checkpoints outlive the view, the mesh and a crash.

One format for both faces: logical arrays by variable path, optimizer slots and
step, seed, and (under ``fit``) the data position.  Saved on a 2x2 hybrid mesh
it loads bit-identically in the mirrored view on 2 and 1 devices; a SIGKILLed
``fit`` with ``BackupAndRestore`` resumes at its last saved step and ends where
an uninterrupted run ends; a kill during a save leaves the previous checkpoint
loadable; a wrong or damaged checkpoint raises and changes nothing.
"""
import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import flowlayers as flow
import flowlayers.typing as tp
from flowlayers import checkpoint
from flowlayers.framework.variable import store

PROGRAMS = Path(__file__).resolve().parent / "checkpoint_programs"
sys.path.insert(0, str(PROGRAMS))
import kill_during_save  # noqa: E402
import resume_fit  # noqa: E402


def use(view, n, mesh=None, rules=None):
    flow.config.set_view(view)
    flow.config.gpu_device_num(n)
    flow.config.set_mesh(**(mesh or {}))
    flow.config.set_layout_rules(rules or {})


def mlp(hidden=16, classes=3, compile=True):
    flow.clear_session()
    x = flow.Input((8,))
    h = flow.layers.Dense(hidden, activation="relu")(x)                  # dense
    model = flow.Model(x, flow.layers.Dense(classes)(h))                  # dense_1
    if compile:
        model.compile(flow.optimizers.Adam(0.01), flow.losses.SparseCategoricalCrossentropy(from_logits=True),
                      metrics=["accuracy"])
    return model


def fit(model, epochs=1, callbacks=()):
    x, y = resume_fit.data()
    return model.fit(x, y, batch_size=40, epochs=epochs, verbose=0, callbacks=list(callbacks))


def optimizer_state(model):
    slots = checkpoint.slot_variables(model._optimizers())
    return {k: v.numpy() for k, v in slots.items()}, model.optimizer.iterations


def max_diff(a, b):
    return max(float(np.abs(x - y).max()) for x, y in zip(a, b))


def run(program, *args):
    env = dict(os.environ, FLOWLAYERS_CPU_DEVICES="4", TF_CPP_MIN_LOG_LEVEL="3")
    env.pop("FLOWLAYERS_VIEW", None)
    return subprocess.run([sys.executable, str(PROGRAMS / program), *map(str, args)], env=env,
                          capture_output=True, text=True, timeout=300)


def test_hybrid_mesh_checkpoint_loads_in_mirrored_view_on_2_and_1_devices(tmp_path):
    use("consistent", 4, {"data": 2, "model": 2}, {"dense/kernel": (None, "model")})
    model = mlp()
    fit(model)
    kernel = model.get_layer("dense").weights[0]
    assert kernel._runtime.shard_shapes(kernel._handle) == [(8, 8)] * 4     # really split over "model"
    weights, (slots, step), x = model.get_weights(), optimizer_state(model), resume_fit.data()[0]
    predictions = model.predict(x)
    model.save_weights(tmp_path / "ckpt")
    fit(model)
    continued = model.get_weights()

    for n in (2, 1):
        use("mirrored", n)
        loaded = mlp()
        loaded.load_weights(tmp_path / "ckpt")
        assert all(np.array_equal(a, b) for a, b in zip(loaded.get_weights(), weights)), n
        loaded_slots, loaded_step = optimizer_state(loaded)
        assert loaded_step == step and sorted(loaded_slots) == sorted(slots)
        assert all(np.array_equal(loaded_slots[k], slots[k]) for k in slots), n
        np.testing.assert_allclose(loaded.predict(x), predictions, atol=1e-6)
        loaded.save_weights(tmp_path / f"from_{n}")
        fit(loaded)       # the restored Adam state continues the run as if never moved
        assert max_diff(loaded.get_weights(), continued) < 1e-5, n

    use("consistent", 4, {"data": 2, "model": 2}, {"dense/kernel": (None, "model")})     # and back again
    back = mlp()
    back.load_weights(tmp_path / "from_1")
    assert all(np.array_equal(a, b) for a, b in zip(back.get_weights(), weights))
    kernel = back.get_layer("dense").weights[0]
    assert kernel._runtime.shard_shapes(kernel._handle) == [(8, 8)] * 4


def job_function(view):
    """One train job (SGD with momentum and a step-dependent rate: slots and step both matter)."""
    cfg = flow.function_config()
    cfg.default_logical_view(flow.scope.consistent_view() if view == "consistent" else flow.scope.mirrored_view())

    @flow.global_function(type="train", function_config=cfg)
    def train_job(x: tp.Numpy.Placeholder((40, 8)), y: tp.Numpy.Placeholder((40,), dtype=flow.int32)) -> tp.Numpy:
        h = flow.layers.dense(x, 16, activation=flow.nn.relu, name="hidden")
        loss = flow.nn.sparse_softmax_cross_entropy_with_logits(y, flow.layers.dense(h, 3, name="out"))
        flow.optimizer.SGD(flow.optimizer.PiecewiseConstantScheduler([4], [0.1, 0.02]), momentum=0.9).minimize(loss)
        return loss
    return train_job


def test_job_face_checkpoint_restores_slots_and_step_in_another_view(tmp_path):
    x, y = resume_fit.data()
    batches = [(x[i:i + 40], y[i:i + 40]) for i in range(0, 200, 40)] * 2
    use("consistent", 4, {"data": 2, "model": 2}, {"hidden/kernel": (None, "model")})
    flow.clear_session()
    job = job_function("consistent")
    for b in batches[:3]:
        job(*b)
    flow.train.CheckPoint().save(tmp_path / "ckpt")
    for b in batches[3:8]:
        job(*b)
    continued = {p: v.numpy() for p, v in store.variables.items()}

    use("mirrored", 1)
    flow.clear_session()
    job = job_function("mirrored")
    flow.train.CheckPoint().load(tmp_path / "ckpt")
    rule = job._compiled[1].optimizer
    assert rule.iterations == 3
    assert all(np.abs(s.numpy()).max() > 0 for slots in rule._slot_variables.values() for s in slots)
    for b in batches[3:8]:          # the rate drops after step 4: the restored step decides when
        job(*b)
    assert sorted(store.variables) == sorted(continued)
    assert max(float(np.abs(store.variables[p].numpy() - continued[p]).max()) for p in continued) < 1e-5


@pytest.mark.parametrize("view", ["consistent", "mirrored"])
def test_sigkilled_fit_resumes_at_its_last_saved_step(view, tmp_path):
    backup, out = tmp_path / "backup", tmp_path / "out.npz"
    command = ("resume_fit.py", view, backup, out, "--kill-once-at", 9)     # saves after steps 2, 4, 6, 8
    killed = run(*command)
    assert killed.returncode == -signal.SIGKILL, killed.stderr[-3000:]
    assert checkpoint.exists(backup / "latest") and not out.exists()
    rerun = run(*command)
    assert rerun.returncode == 0, rerun.stderr[-3000:]
    result = np.load(out)
    meta = json.loads(str(result["meta"]))
    assert meta["first_step"] == [1, 3, 8]          # mid-epoch: epoch 1 after its batches 0-2, at step 8
    assert not backup.exists()                      # delete_checkpoint=True once fit completes

    reference, history = resume_fit.train(view)
    weights = [result[f"arr_{i}"] for i in range(len(reference.weights))]
    assert max_diff(weights, reference.get_weights()) < 1e-6
    for key, values in history.history.items():     # the resumed epoch's logs include the steps done before
        np.testing.assert_allclose(meta["history"][key], values[1:], atol=1e-6)


@pytest.mark.parametrize("where", ["file", "swap"])
def test_kill_during_save_leaves_the_previous_checkpoint_loadable(where, tmp_path):
    ckpt, expected = tmp_path / "ckpt", tmp_path / "expected.npz"
    killed = run("kill_during_save.py", ckpt, expected, where)
    assert killed.returncode == -signal.SIGKILL, killed.stderr[-3000:]
    partial = list(tmp_path.glob(checkpoint.tmp_prefix("ckpt") + "*"))
    assert len(partial) == 1
    if where == "file":         # a half-written file, no manifest; the old checkpoint untouched
        assert not (partial[0] / checkpoint.MANIFEST).exists() and (ckpt / checkpoint.MANIFEST).exists()
    else:                       # the old checkpoint moved aside, the new one not yet in place
        assert not ckpt.exists() and (tmp_path / "ckpt.old" / checkpoint.MANIFEST).exists()

    use("mirrored", 1)
    model = kill_during_save.build()
    model.load_weights(ckpt)
    saved = np.load(expected)
    assert all(np.array_equal(w, saved[f"arr_{i}"]) for i, w in enumerate(model.get_weights()))
    model.save_weights(ckpt)        # the next save completes and clears what the killed one left
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ckpt", "expected.npz"]


def test_wrong_architecture_and_damaged_checkpoint_raise_and_change_nothing(tmp_path):
    use("consistent", 2)
    other = mlp(classes=4)
    other.save_weights(tmp_path / "other")
    reference = mlp()
    fit(reference)
    fit(reference)

    model = mlp()
    fit(model)
    model.save_weights(tmp_path / "damaged")
    manifest = json.loads((tmp_path / "damaged" / checkpoint.MANIFEST).read_text())
    last = max(manifest["variables"].values(), key=lambda e: e["file"])["file"]     # an optimizer slot's file
    data = (tmp_path / "damaged" / last).read_bytes()
    (tmp_path / "damaged" / last).write_bytes(data[:len(data) // 2])
    before = model.get_weights(), optimizer_state(model)

    with pytest.raises(flow.CheckpointError) as e:
        model.load_weights(tmp_path / "other")
    assert "dense_1/kernel" in str(e.value) and "(16, 3)" in str(e.value) and "(16, 4)" in str(e.value)
    with pytest.raises(flow.CheckpointError) as e:
        model.load_weights(tmp_path / "damaged")
    assert "damaged" in str(e.value) and last in str(e.value)
    (tmp_path / "damaged" / checkpoint.MANIFEST).write_text(json.dumps(manifest)[:100])
    with pytest.raises(flow.CheckpointError) as e:
        model.load_weights(tmp_path / "damaged")
    assert "damaged" in str(e.value) and checkpoint.MANIFEST in str(e.value)

    (weights, (slots, step)), (weights0, (slots0, step0)) = (model.get_weights(), optimizer_state(model)), before
    assert step == step0 and all(np.array_equal(a, b) for a, b in zip(weights, weights0))
    assert all(np.array_equal(slots[k], slots0[k]) for k in slots0)
    fit(model)
    assert max_diff(model.get_weights(), reference.get_weights()) < 1e-6


def test_optimizer_state_loaded_before_compile_is_restored_at_fit(tmp_path):
    use("mirrored", 2)
    reference = mlp()
    fit(reference)
    reference.save_weights(tmp_path / "ckpt")
    fit(reference)
    model = mlp(compile=False)
    model.load_weights(tmp_path / "ckpt")
    model.compile(flow.optimizers.Adam(0.01), flow.losses.SparseCategoricalCrossentropy(from_logits=True))
    fit(model)
    assert model.optimizer.iterations == reference.optimizer.iterations == 10
    assert max_diff(model.get_weights(), reference.get_weights()) < 1e-6


class Interrupt(flow.callbacks.Callback):
    def on_epoch_end(self, epoch, logs=None):
        raise KeyboardInterrupt


def test_epoch_backup_resumes_at_the_next_epoch_and_refuses_another_seed(tmp_path):
    use("mirrored", 2)
    reference = resume_fit.build()          # with Dropout: its masks follow the seed and the step
    fit(reference, epochs=2)
    with pytest.raises(KeyboardInterrupt):
        fit(resume_fit.build(), epochs=2, callbacks=[flow.callbacks.BackupAndRestore(tmp_path), Interrupt()])
    model = resume_fit.build()
    initial = model.get_weights()
    flow.config.set_seed(1)
    try:
        with pytest.raises(flow.CheckpointError) as e:
            fit(model, epochs=2, callbacks=[flow.callbacks.BackupAndRestore(tmp_path)])
    finally:
        flow.config.set_seed(0)
    assert "set_seed(1)" in str(e.value) and "seed 0" in str(e.value)
    assert all(np.array_equal(a, b) for a, b in zip(model.get_weights(), initial))
    history = fit(model, epochs=2, callbacks=[flow.callbacks.BackupAndRestore(tmp_path)])
    assert model.optimizer.iterations == 10 and len(history.history["loss"]) == 1
    assert max_diff(model.get_weights(), reference.get_weights()) < 1e-6


def test_save_never_replaces_a_directory_of_other_files(tmp_path):
    use("mirrored", 1)
    model = mlp()
    mine = tmp_path / "notes"
    mine.mkdir()
    (mine / "precious.txt").write_text("keep me")
    (tmp_path / "file").write_text("keep me too")
    for path, words in ((mine, "precious.txt"), (tmp_path / "file", "existing file")):
        with pytest.raises(flow.CheckpointError) as e:
            model.save_weights(path)
        assert repr(str(path)) in str(e.value) and words in str(e.value) and "choose another path" in str(e.value)
    assert (mine / "precious.txt").read_text() == "keep me" and (tmp_path / "file").read_text() == "keep me too"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["file", "notes"]
    (tmp_path / "empty").mkdir()
    model.save_weights(tmp_path / "empty")          # an empty directory, then an earlier checkpoint: replaced
    model.save_weights(tmp_path / "empty")
    assert checkpoint.exists(tmp_path / "empty")
