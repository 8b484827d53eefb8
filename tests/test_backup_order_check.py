"""BackupAndRestore's order check: a resumed epoch skips the batches its backup's run trained on, and a rerun whose
data comes in another order (another shuffle seed, reordered arrays) is refused by name instead of training some
samples twice and others never.  In-process: a callback raising after a save stands for the kill."""
import inspect
import json
import sys
from pathlib import Path

import numpy as np
import pytest

import flowlayers as flow
from flowlayers.framework import checkpoint_format as checkpoint
from flowlayers.models.batch_fingerprint import Fingerprint
from flowlayers.models.data_adapter import Batch

sys.path.insert(0, str(Path(__file__).resolve().parent / "checkpoint_programs"))
import resume_fit  # noqa: E402


def files(directory):
    """Every file under ``directory`` and its bytes."""
    return {p.relative_to(directory): p.read_bytes() for p in sorted(Path(directory).rglob("*")) if p.is_file()}


def manifest(directory):
    return Path(directory) / "latest" / checkpoint.MANIFEST


def max_diff(a, b):
    return max(float(np.abs(x - y).max()) for x, y in zip(a, b))


def fit_arrays(model, backup, x, y, *callbacks, **options):
    return model.fit(x, y, batch_size=40, epochs=2, shuffle=True, verbose=0,
                     callbacks=[flow.callbacks.BackupAndRestore(backup, save_freq=2, **options), *callbacks])


@pytest.fixture
def interrupted(tmp_path):
    """A backup of a fit on shuffled arrays, saved mid-epoch 2 (after its batch 3 of 5), and the data."""
    flow.config.set_view("mirrored")
    flow.config.gpu_device_num(2)
    x, y = resume_fit.data()
    with pytest.raises(KeyboardInterrupt):
        fit_arrays(resume_fit.build(), tmp_path, x, y, resume_fit.InterruptAt(8))
    return tmp_path, x, y


def reference_weights(x, y):
    model = resume_fit.build()
    model.fit(x, y, batch_size=40, epochs=2, shuffle=True, verbose=0)
    return model.get_weights()


def test_a_resume_on_arrays_in_the_same_order_passes_and_ends_as_an_uninterrupted_run(interrupted):
    backup, x, y = interrupted
    position = json.loads(manifest(backup).read_text())["state"]["position"]
    assert (position["epoch"], position["batch"]) == (1, 3) and len(position["fingerprint"]) == 32
    model = resume_fit.build()
    fit_arrays(model, backup, x, y)
    assert model.optimizer.iterations == 10 and max_diff(model.get_weights(), reference_weights(x, y)) < 1e-6


def test_a_resume_on_reordered_arrays_is_refused_and_changes_no_backup_file(interrupted):
    backup, x, y = interrupted
    before = files(backup)
    saved = checkpoint.Reader(backup / "latest")
    model = resume_fit.build()
    with pytest.raises(flow.CheckpointError) as e:
        fit_arrays(model, backup, x[::-1], y[::-1])        # the same samples, reversed: the shuffle takes others
    message = str(e.value)
    for words in (f"BackupAndRestore({str(backup)!r})", "the 3 batch(es) of epoch 2", "order differs",
                  "shuffle seed", "tf.random.set_seed", "same data and seeds", "delete the backup",
                  "check_order=False"):
        assert words in message, (words, message)
    assert files(backup) == before                      # nothing lost: the backup as it was
    assert model.optimizer.iterations == 8              # no step taken: the model holds the backup's state
    assert saved.state["position"]["batch"] == 3
    fit_arrays(model, backup, x, y)                     # the right data then resumes, exactly
    assert model.optimizer.iterations == 10 and max_diff(model.get_weights(), reference_weights(x, y)) < 1e-6


def test_check_order_false_resumes_on_other_batches(interrupted):
    backup, x, y = interrupted
    model = resume_fit.build()
    fit_arrays(model, backup, x[::-1], y[::-1], check_order=False)
    assert model.optimizer.iterations == 10


def test_a_backup_saved_without_a_fingerprint_still_resumes_unchecked(interrupted):
    backup, x, y = interrupted
    text = json.loads(manifest(backup).read_text())
    del text["state"]["position"]["fingerprint"]          # as a backup written before the check
    manifest(backup).write_text(json.dumps(text))
    model = resume_fit.build()
    fit_arrays(model, backup, x, y)
    assert model.optimizer.iterations == 10 and max_diff(model.get_weights(), reference_weights(x, y)) < 1e-6


def test_a_fit_without_a_mid_epoch_backup_fingerprints_nothing(tmp_path):
    flow.config.set_view("mirrored")
    flow.config.gpu_device_num(2)
    x, y = resume_fit.data()
    seen = []

    class Look(flow.callbacks.Callback):
        def on_train_batch_end(self, batch, logs=None):
            seen.append(self.model.trainer.fit_state.fingerprint)

    resume_fit.build().fit(x, y, batch_size=40, epochs=1, verbose=0, callbacks=[Look()])
    resume_fit.build().fit(x, y, batch_size=40, epochs=1, verbose=0,
                           callbacks=[flow.callbacks.BackupAndRestore(tmp_path), Look()])
    assert seen == [None] * 10


@pytest.mark.needs_tensorflow     # a tf.data.Dataset input
def test_a_dataset_resume_in_another_shuffle_order_is_refused_and_the_same_order_resumes(tmp_path):
    import tensorflow as tf

    flow.config.set_view("mirrored")
    flow.config.gpu_device_num(2)

    def dataset(seed=1):
        x, y = resume_fit.data()
        return tf.data.Dataset.from_tensor_slices((x, y)).shuffle(200, seed=seed).batch(40)

    def fit_on(ds, model, *callbacks):
        return model.fit(ds, epochs=2, verbose=0, callbacks=[flow.callbacks.BackupAndRestore(tmp_path, save_freq=2),
                                                            *callbacks])

    with pytest.raises(KeyboardInterrupt):
        fit_on(dataset(), resume_fit.build(), resume_fit.InterruptAt(8))      # epoch 2, after its batch 3
    before = files(tmp_path)
    model = resume_fit.build()
    with pytest.raises(flow.CheckpointError) as e:
        fit_on(dataset(seed=2), model)                                  # another shuffle seed
    assert "the 3 batch(es) of epoch 2" in str(e.value) and "order differs" in str(e.value)
    with pytest.raises(flow.CheckpointError):
        fit_on(dataset(seed=None), model)                               # unseeded: a new order each time
    tf.random.set_seed(3)        # TensorFlow's global seed changes a seeded shuffle's order too
    try:
        with pytest.raises(flow.CheckpointError):
            fit_on(dataset(), model)
    finally:
        tf.random.set_seed(None)
    assert files(tmp_path) == before and model.optimizer.iterations == 8

    fit_on(dataset(), model)
    reference = resume_fit.build()
    reference.fit(dataset(), epochs=2, verbose=0)
    assert model.optimizer.iterations == 10 and max_diff(model.get_weights(), reference.get_weights()) < 1e-6


def grouped_model():
    """resume_fit's model, its batches handed to the engine two at a time."""
    model = resume_fit.build()
    model.compile(flow.optimizers.Adam(0.01), flow.losses.SparseCategoricalCrossentropy(from_logits=True),
                  metrics=["accuracy"], steps_per_execution=2)
    return model


def test_grouped_steps_and_a_smaller_last_batch_resume_checked(tmp_path):
    flow.config.set_view("mirrored")
    flow.config.gpu_device_num(2)
    x, y = resume_fit.data()

    def fit_grouped(model, x, y, *callbacks):     # 7 batches an epoch (the last of 20): groups of 2, 2, 2, 1
        return model.fit(x, y, batch_size=30, epochs=2, shuffle=True, verbose=0,
                         callbacks=[flow.callbacks.BackupAndRestore(tmp_path, save_freq=2), *callbacks])

    with pytest.raises(KeyboardInterrupt):
        fit_grouped(grouped_model(), x, y, resume_fit.InterruptAt(11))
    assert json.loads(manifest(tmp_path).read_text())["state"]["position"]["batch"] == 4
    model = grouped_model()
    with pytest.raises(flow.CheckpointError) as e:
        fit_grouped(model, x[::-1], y[::-1])
    assert "the 4 batch(es) of epoch 2" in str(e.value)
    fit_grouped(model, x, y)
    reference = grouped_model()
    reference.fit(x, y, batch_size=30, epochs=2, shuffle=True, verbose=0)
    assert model.optimizer.iterations == 14 and max_diff(model.get_weights(), reference.get_weights()) < 1e-6


def test_backup_takes_keras_arguments_in_keras_order_and_refuses_what_it_cannot_do(tmp_path):
    keras = pytest.importorskip("keras")
    ours = list(inspect.signature(flow.callbacks.BackupAndRestore).parameters)
    theirs = list(inspect.signature(keras.callbacks.BackupAndRestore).parameters)
    assert ours[:len(theirs)] == theirs         # positional arguments mean what they mean in Keras
    with pytest.raises(flow.ConfigError, match=r"BackupAndRestore: double_checkpoint=True .* is not taken.* "
                                               r"expected double_checkpoint=False"):
        flow.callbacks.BackupAndRestore(tmp_path, "epoch", True)
    with pytest.raises(flow.ConfigError, match=r"BackupAndRestore: check_order expected True or False, received 'no'"):
        flow.callbacks.BackupAndRestore(tmp_path, check_order="no")
    assert flow.callbacks.BackupAndRestore(tmp_path, 5, False, False).delete_checkpoint is False


@pytest.mark.parametrize("order", [None, np.array([4, 0, 3, 1, 2, 5])])
def test_a_batch_of_rows_fingerprints_as_the_arrays_it_stands_for(order):
    """Batches of rows of whole arrays (taken on the devices, never read on the host) and the same rows as host
    arrays give one fingerprint; one element changed gives another."""
    x = np.arange(24, dtype=np.float32).reshape(6, 4)
    y = np.arange(6, dtype=np.int32)
    rows = np.arange(6) if order is None else order
    of_batches, of_arrays, of_changed = Fingerprint(), Fingerprint(), Fingerprint()
    for start in (0, 3):
        of_batches.add(Batch((x, y), order, start, 3))
        taken = rows[start:start + 3]
        of_arrays.add((x[taken], y[taken]))
        changed = x[taken].copy()
        changed[-1, -1] += 1
        of_changed.add((changed, y[taken]))
    assert of_batches.hexdigest() == of_arrays.hexdigest()
    assert of_changed.hexdigest() != of_arrays.hexdigest()


class SetsSeed(flow.callbacks.Callback):
    """Sets another global seed as each epoch begins: it reaches the next fit, not this one."""

    def on_epoch_begin(self, epoch, logs=None):
        flow.config.set_seed(5)


def test_a_backup_holds_the_seed_its_fit_runs_with_not_one_set_during_it(tmp_path):
    flow.config.set_view("mirrored")
    flow.config.gpu_device_num(2)
    x, y = resume_fit.data()
    with pytest.raises(KeyboardInterrupt):
        fit_arrays(resume_fit.build(), tmp_path, x, y, SetsSeed(), resume_fit.InterruptAt(8))
    assert checkpoint.Reader(tmp_path / "latest").state["rng"]["seed"] == 0
    flow.config.set_seed(0)
    model = resume_fit.build()
    fit_arrays(model, tmp_path, x, y)
    assert model.optimizer.iterations == 10 and max_diff(model.get_weights(), reference_weights(x, y)) < 1e-6
