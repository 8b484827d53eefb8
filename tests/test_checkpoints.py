"""Checkpoints outlive the view, the mesh and a crash.

One format for both faces: logical arrays by variable path, optimizer slots and
step, seed, and (under ``fit``) the data position.  Saved on a 2x2 hybrid mesh
it loads bit-identically in the mirrored view on 2 and 1 devices; a SIGKILLed
``fit`` with ``BackupAndRestore`` resumes at its last saved step and ends where
an uninterrupted run ends; a kill during a save leaves the previous checkpoint
loadable; a wrong or damaged checkpoint raises and changes nothing.
"""
import hashlib
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
from flowlayers.framework import checkpoint_format as checkpoint
from flowlayers.framework.variable import store
from places import shards, use

PROGRAMS = Path(__file__).resolve().parent / "checkpoint_programs"
sys.path.insert(0, str(PROGRAMS))
import kill_during_save  # noqa: E402
import resume_fit  # noqa: E402


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
    slots = checkpoint.slot_variables(model.trainer.optimizers())
    return {k: v.numpy() for k, v in slots.items()}, model.optimizer.iterations


def max_diff(a, b):
    return max(float(np.abs(x - y).max()) for x, y in zip(a, b))


def refused(model, action):
    """The message of the CheckpointError ``action()`` raises; ``model``'s weights are left as they were."""
    before = model.get_weights()
    with pytest.raises(flow.CheckpointError) as e:
        action()
    assert all(np.array_equal(a, b) for a, b in zip(model.get_weights(), before))
    return str(e.value)


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
    assert shards(kernel) == [(8, 8)] * 4     # really split over "model"
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
    assert shards(kernel) == [(8, 8)] * 4


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
    use("consistent", 4, {"data": 2, "model": 2}, {"hidden/kernel": (None, "model")}, fresh=True)
    job = job_function("consistent")
    for b in batches[:3]:
        job(*b)
    flow.train.CheckPoint().save(tmp_path / "ckpt")
    for b in batches[3:8]:
        job(*b)
    continued = {p: v.numpy() for p, v in store.variables.items()}

    use("mirrored", 1, fresh=True)
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
@pytest.mark.slow
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


@pytest.mark.slow
@pytest.mark.parametrize("step, kept", [("file written", "first"), ("moved aside", "second")])
def test_kill_during_save_leaves_a_loadable_checkpoint(step, kept, tmp_path):
    """Killed before its commit point, a save leaves the previous checkpoint; after it, the new one."""
    ckpt, expected = tmp_path / "ckpt", tmp_path / "expected.npz"
    killed = run("kill_during_save.py", ckpt, expected, step)
    assert killed.returncode == -signal.SIGKILL, killed.stderr[-3000:]
    if step == "file written":      # one file of the new checkpoint in its temporary directory; the old one in place
        partial = list(tmp_path.glob(checkpoint.tmp_prefix("ckpt") + "*"))
        assert len(partial) == 1 and sorted(p.name for p in partial[0].iterdir()) == ["00000.npy"]
        assert (ckpt / checkpoint.MANIFEST).exists()
    else:                           # the old checkpoint moved aside, the new one not yet in its place
        assert not ckpt.exists() and (tmp_path / ".ckpt.old" / checkpoint.MANIFEST).exists()
        assert (tmp_path / ".ckpt.new" / checkpoint.MANIFEST).exists()
    assert checkpoint.exists(ckpt)

    use("mirrored", 1)
    model = kill_during_save.build()
    model.load_weights(ckpt)
    saved = np.load(expected)
    assert all(np.array_equal(w, saved[f"{kept}_{i}"]) for i, w in enumerate(model.get_weights()))
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
    entry = next(e for e in manifest["variables"].values() if e["file"] == last)
    with pytest.raises(flow.CheckpointError) as e:
        model.load_weights(tmp_path / "damaged")
    assert f"checkpoint {str(tmp_path / 'damaged')!r} is damaged: file {tmp_path / 'damaged' / last}" in str(e.value)
    assert f"expected {entry['bytes']} bytes with sha256 {entry['sha256'][:12]}..., received {len(data) // 2} " \
           f"bytes with sha256 {hashlib.sha256(data[:len(data) // 2]).hexdigest()[:12]}...; restore the " \
           f"checkpoint from a copy or save it again" in str(e.value)
    (tmp_path / "damaged" / last).unlink()
    with pytest.raises(flow.CheckpointError) as e:
        model.load_weights(tmp_path / "damaged")
    assert f"{last} (variable " in str(e.value) and "received no file (missing)" in str(e.value)
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


def rewrite(directory, key, value):
    """Store ``value`` as ``key``'s array with a manifest entry to match, as a converter writing a checkpoint would."""
    manifest = json.loads((directory / checkpoint.MANIFEST).read_text())
    entry = manifest["variables"][key]
    np.save(directory / entry["file"], value, allow_pickle=False)
    data = (directory / entry["file"]).read_bytes()
    entry.update(shape=list(value.shape), dtype=str(value.dtype), bytes=len(data),
                 sha256=hashlib.sha256(data).hexdigest())
    (directory / checkpoint.MANIFEST).write_text(json.dumps(manifest))


def flip_last_byte(path):
    """Change one value of an array file and nothing else: np.load still reads it, only the checksum can tell."""
    data = bytearray(path.read_bytes())
    data[-1] ^= 0x40
    path.write_bytes(bytes(data))


def file_of(directory, key):
    return directory / json.loads((directory / checkpoint.MANIFEST).read_text())["variables"][key]["file"]


def test_checkpoint_of_a_bigger_architecture_is_refused_and_changes_nothing(tmp_path):
    use("mirrored", 2, fresh=True)
    x = flow.Input((8,))
    h = flow.layers.Dense(16, activation="relu")(x)
    h = flow.layers.Dense(3)(h)                                              # dense_1 fits
    bigger = flow.Model(x, flow.layers.Dense(3)(h))                          # dense_2 is extra
    bigger.compile(flow.optimizers.Adam(0.01), flow.losses.SparseCategoricalCrossentropy(from_logits=True))
    fit(bigger)
    bigger.save_weights(tmp_path / "bigger")
    reference = mlp()
    fit(reference)
    fit(reference)

    for model in (mlp(compile=False), mlp()):
        message = refused(model, lambda: model.load_weights(tmp_path / "bigger"))
        assert f"checkpoint {str(tmp_path / 'bigger')!r}: expected only the model's variables ['dense/bias', " \
               f"'dense/kernel', 'dense_1/bias', 'dense_1/kernel'], received a checkpoint that also holds " \
               f"['dense_2/bias', 'dense_2/kernel']" in message
        assert "load it into the model it was saved from" in message
        assert "adam/" not in message                       # the optimizer's slots are not "extra weights"
        assert model.trainer._deferred is None
    fit(model)
    fit(model)
    assert model.optimizer.iterations == 10 and max_diff(model.get_weights(), reference.get_weights()) < 1e-6


def test_job_face_loads_a_checkpoint_with_variables_no_job_uses_and_names_them(tmp_path):
    use("mirrored", 1)
    x, y = resume_fit.data()
    flow.clear_session()
    train_job = job_function("mirrored")
    train_job(x[:40], y[:40])
    flow.train.CheckPoint().save(tmp_path / "ckpt")
    hidden = store.variables["hidden/kernel"].numpy()

    flow.clear_session()            # a predict-only program: the head and the optimizer are not there

    @flow.global_function(type="predict")
    def features(x: tp.Numpy.Placeholder((40, 8))) -> tp.Numpy:
        return flow.layers.dense(x, 16, activation=flow.nn.relu, name="hidden")

    with pytest.warns(UserWarning, match=r"holds variables no job uses, left out: \['out/bias', 'out/kernel'\]"):
        steps = flow.train.CheckPoint().load(tmp_path / "ckpt")
    assert steps == {} and np.array_equal(store.variables["hidden/kernel"].numpy(), hidden)
    np.testing.assert_allclose(features(x[:40]), np.maximum(x[:40] @ hidden + store.variables["hidden/bias"].numpy(),
                                                            0), atol=1e-5)


def test_a_float_checkpoint_of_another_width_is_cast_and_other_dtypes_are_refused(tmp_path):
    use("mirrored", 1)
    model = mlp()
    model.save_weights(tmp_path / "ckpt")
    wide = np.random.default_rng(0).normal(size=(8, 16))       # float64, as a converter may write it
    rewrite(tmp_path / "ckpt", "dense/kernel", wide)
    model.load_weights(tmp_path / "ckpt")
    kernel = model.get_layer("dense").weights[0].numpy()
    assert kernel.dtype == np.float32 and np.array_equal(kernel, wide.astype(np.float32))

    rewrite(tmp_path / "ckpt", "dense/bias", np.arange(16, dtype=np.int64))
    message = refused(model, lambda: model.load_weights(tmp_path / "ckpt"))
    assert "variable 'dense/bias' expected dtype float32, received int64; load it into a model whose variable has " \
           "dtype int64" in message

    # numpy stores bfloat16 as raw 2-byte records; the manifest's dtype gives them back their meaning
    half = flow.Variable("half", (3,), flow.bfloat16, flow.initializers.get(flow.constant_initializer(1.5)))
    checkpoint.save(tmp_path / "half", {"half": half})
    into = flow.Variable("half", (3,), flow.bfloat16, flow.initializers.get(flow.zeros_initializer()))
    checkpoint.Reader(tmp_path / "half").restore({"half": into})
    assert str(into.numpy().dtype) == "bfloat16" and into.numpy().astype(np.float32).tolist() == [1.5] * 3


@pytest.mark.parametrize("damage", ["no sha256", "shape not a list", "file outside the checkpoint"])
def test_a_manifest_entry_without_its_fields_is_refused_as_damaged(damage, tmp_path):
    use("mirrored", 1)
    model = mlp()
    model.save_weights(tmp_path / "ckpt")
    path = tmp_path / "ckpt" / checkpoint.MANIFEST
    manifest = json.loads(path.read_text())
    entry = manifest["variables"]["dense_1/bias"]
    if damage == "no sha256":
        del entry["sha256"]
    elif damage == "shape not a list":
        entry["shape"] = "3"
    else:
        entry["file"] = "../../secret.npy"
    path.write_text(json.dumps(manifest))
    fit(model)
    message = refused(model, lambda: model.load_weights(tmp_path / "ckpt"))
    assert f"checkpoint {str(tmp_path / 'ckpt')!r} is damaged: file {path} entry 'dense_1/bias' expected fields " \
           f"file/shape/dtype/sha256, received {json.dumps(entry)}; restore the checkpoint from a copy or save it " \
           f"again" in message


def test_a_file_changed_after_its_check_is_never_assigned(tmp_path, monkeypatch):
    use("mirrored", 2)
    model = mlp()
    fit(model)
    model.save_weights(tmp_path / "ckpt")
    saved = model.get_weights()
    fit(model)
    trained = model.get_weights()
    victim = file_of(tmp_path / "ckpt", "dense_1/kernel")      # the third array restored
    good = victim.read_bytes()
    verify = checkpoint.Reader.verify

    def verify_then_another_writer_changes_a_file(reader, *args, **kwargs):
        verify(reader, *args, **kwargs)
        flip_last_byte(victim)

    monkeypatch.setattr(checkpoint.Reader, "verify", verify_then_another_writer_changes_a_file)
    with pytest.raises(flow.CheckpointError) as e:
        model.load_weights(tmp_path / "ckpt")
    assert f"changed while it was being restored: file {victim} (variable 'dense_1/kernel')" in str(e.value)
    assert "2 variable(s) (dense/kernel, dense/bias) were restored from it and the others were not; load it again " \
           "once nothing writes to it" in str(e.value)
    weights = model.get_weights()
    assert all(np.array_equal(a, b) for a, b in zip(weights[:2], saved[:2]))
    assert all(np.array_equal(a, b) for a, b in zip(weights[2:], trained[2:]))  # not the changed array: the old value

    monkeypatch.undo()
    victim.write_bytes(good)
    model.load_weights(tmp_path / "ckpt")
    assert all(np.array_equal(a, b) for a, b in zip(model.get_weights(), saved))


def test_optimizer_state_loaded_before_compile_is_read_from_disk_when_the_optimizer_arrives(tmp_path):
    use("mirrored", 2)
    reference = mlp()
    fit(reference)
    reference.save_weights(tmp_path / "ckpt")
    saved = reference.get_weights()
    fit(reference)
    model = mlp(compile=False)
    model.load_weights(tmp_path / "ckpt")
    assert not any(isinstance(v, np.ndarray) for v in vars(model.trainer._deferred).values())
    model.compile(flow.optimizers.Adam(0.01), flow.losses.SparseCategoricalCrossentropy(from_logits=True))
    last_slot = file_of(tmp_path / "ckpt", "adam/dense_1/bias/v")
    good = last_slot.read_bytes()

    flip_last_byte(last_slot)       # another save, or a disk fault, between load_weights and fit
    with pytest.raises(flow.CheckpointError) as e:
        fit(model)
    assert f"changed or vanished since load_weights read it: file {last_slot} (variable " \
           f"'adam/dense_1/bias/v') expected {len(good)} bytes with sha256 " \
           f"{hashlib.sha256(good).hexdigest()[:12]}..., received {len(good)} bytes with sha256 " in str(e.value)
    assert "nothing of the optimizer state was restored (the weights were); put the checkpoint back and train " \
           "again" in str(e.value)
    slots = checkpoint.slot_variables({"adam": (model.optimizer, model.trainable_weights)})
    assert model.optimizer.iterations == 0 and all(not v.numpy().any() for v in slots.values())   # none half-restored
    assert all(np.array_equal(a, b) for a, b in zip(model.get_weights(), saved))
    last_slot.unlink()
    with pytest.raises(flow.CheckpointError, match="received no file \\(missing\\)"):
        fit(model)

    last_slot.write_bytes(good)     # put back: the pending state lands at the next fit
    fit(model)
    assert model.optimizer.iterations == reference.optimizer.iterations == 10
    assert max_diff(model.get_weights(), reference.get_weights()) < 1e-6


@pytest.mark.needs_tensorflow     # a tf.data.Dataset input
@pytest.mark.slow
def test_sigkilled_fit_on_a_seeded_shuffled_dataset_resumes_exactly(tmp_path):
    import resume_fit_dataset     # imports TensorFlow: here, where the marker says it is installed

    backup, out = tmp_path / "backup", tmp_path / "out.npz"
    command = ("resume_fit_dataset.py", "consistent", backup, out, "--kill-once-at", 9)   # saves after 2, 4, 6, 8
    killed = run(*command)
    assert killed.returncode == -signal.SIGKILL, killed.stderr[-3000:]
    rerun = run(*command)
    assert rerun.returncode == 0, rerun.stderr[-3000:]
    result = np.load(out)
    assert json.loads(str(result["meta"]))["first_step"] == [1, 3, 8]      # mid-epoch 2, in its own order

    reference, _ = resume_fit_dataset.train("consistent")
    weights = [result[f"arr_{i}"] for i in range(len(reference.weights))]
    assert max_diff(weights, reference.get_weights()) < 1e-6


def test_a_dataset_backup_resumes_only_on_data_like_the_one_it_was_saved_with(tmp_path):
    import tensorflow as tf

    use("mirrored", 2)

    def dataset(batch=40, x_dtype=np.float32):
        x, y = resume_fit.data()
        return tf.data.Dataset.from_tensor_slices((x.astype(x_dtype), y)).shuffle(200, seed=1).batch(batch)

    def fit_on(ds, model, *callbacks):
        return model.fit(ds, epochs=2, verbose=0, callbacks=[flow.callbacks.BackupAndRestore(tmp_path, save_freq=2),
                                                            *callbacks])

    with pytest.raises(KeyboardInterrupt):
        fit_on(dataset(), resume_fit.build(), resume_fit.InterruptAt(8))      # the backup: epoch 2, after its batch 3
    model = resume_fit.build()
    refusals = [(dataset(batch=50), "batches per epoch 4, received one with 5"),          # known cardinality
                (dataset(x_dtype=np.float64), "dataset elements ((None, 8) float64, (None,) int32), received one "
                                              "with ((None, 8) float32, (None,) int32)")]
    for ds, words in refusals:
        message = refused(model, lambda: fit_on(ds, model))
        assert f"BackupAndRestore({str(tmp_path)!r}): expected a backup of a run with {words}" in message
    # unknown cardinality: checked while skipping, once the backup is restored (the model then holds the backup's
    # state, the run it resumes, whole: not its initial weights)
    shorter = dataset().filter(lambda x, y: True).take(2)
    with pytest.raises(flow.CheckpointError) as e:
        fit_on(shorter, model)
    assert "expected data with at least 3 batches in epoch 2, where the backup was saved, received 2" in str(e.value)

    fit_on(dataset(), model)
    reference = resume_fit.build()
    reference.fit(dataset(), epochs=2, verbose=0)
    assert model.optimizer.iterations == 10 and max_diff(model.get_weights(), reference.get_weights()) < 1e-6


def dropout_job():
    @flow.global_function(type="train")
    def train_job(x: tp.Numpy.Placeholder((40, 8)), y: tp.Numpy.Placeholder((40,), dtype=flow.int32)) -> tp.Numpy:
        h = flow.nn.dropout(flow.layers.dense(x, 16, activation=flow.nn.relu, name="hidden"), rate=0.25)
        loss = flow.nn.sparse_softmax_cross_entropy_with_logits(y, flow.layers.dense(h, 3, name="out"))
        flow.optimizer.Adam(flow.optimizer.PiecewiseConstantScheduler([5], [0.01, 0.003])).minimize(loss)
        return loss
    return train_job


def test_job_function_loop_resumes_from_its_last_checkpoint(tmp_path):
    """The loop of flow.train's docstring: killed after step 8 (saved after 3 and 6), rebuilt, resumed at 6."""
    x, y = resume_fit.data()
    batches = [(x[i:i + 40], y[i:i + 40]) for i in range(0, 200, 40)] * 2
    use("consistent", 2)

    def loop(ckpt_dir, crash_after=None):
        flow.clear_session()
        train_job = dropout_job()
        ckpt = flow.train.CheckPoint()
        start = ckpt.load(ckpt_dir)["train_job"] if ckpt.exists(ckpt_dir) else 0
        assert train_job.step == start          # the job itself says where its loop stands
        for step in range(start, len(batches)):
            train_job(*batches[step])
            if (step + 1) % 3 == 0:
                ckpt.save(ckpt_dir)
            if step + 1 == crash_after:
                break
        assert train_job.step == step + 1
        return start, {p: v.numpy() for p, v in store.variables.items()}

    _, uninterrupted = loop(tmp_path / "reference")
    assert loop(tmp_path / "ckpt", crash_after=8)[0] == 0
    start, resumed = loop(tmp_path / "ckpt")
    assert start == 6 and sorted(resumed) == sorted(uninterrupted)
    assert max(float(np.abs(resumed[p] - uninterrupted[p]).max()) for p in resumed) < 1e-6


class _ScaleV(flow.layers.Layer):
    """A layer whose weight is named like an Adam slot ('v')."""

    def build(self, input_shape):
        self.v = self.add_weight("v", (input_shape[-1],), initializer="ones")

    def call(self, x):
        return x * self.read(self.v)


def test_an_extra_weight_named_like_a_slot_is_still_an_extra_weight(tmp_path):
    use("mirrored", 1, fresh=True)
    x = flow.Input((8,))
    h = flow.layers.Dense(16, activation="relu")(x)
    bigger = flow.Model(x, flow.layers.Dense(3)(_ScaleV(name="scale")(h)))
    bigger.compile(flow.optimizers.Adam(0.01), flow.losses.SparseCategoricalCrossentropy(from_logits=True))
    fit(bigger)
    bigger.save_weights(tmp_path / "bigger")
    model = mlp()
    message = refused(model, lambda: model.load_weights(tmp_path / "bigger"))
    assert "also holds ['scale/v']" in message


def test_checkpoint_init_gives_every_variable_its_initial_value_and_step_zero(tmp_path):
    use("mirrored", 1, fresh=True)
    train_job = job_function("mirrored")
    x, y = resume_fit.data()
    train_job(x[:40], y[:40])
    initial = {path: var.numpy() for path, var in store.variables.items()}
    for _ in range(3):
        train_job(x[:40], y[:40])
    assert train_job.step == 4
    flow.train.CheckPoint().init()
    assert train_job.step == 0
    train_job(x[:40], y[:40])            # the first step again, from the initial values
    for path, var in store.variables.items():
        np.testing.assert_allclose(var.numpy(), initial[path], atol=1e-6, err_msg=path)
