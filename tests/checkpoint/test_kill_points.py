"""A save SIGKILLed at any of its steps leaves a path that the next save, load and ``BackupAndRestore`` run take,
with the newest complete checkpoint kept (issue 37, finding 2).

A backup of a ``fit`` after step 4 is overwritten by one after step 6, and the writing process kills itself at
one step of that save (``checkpoint_format.at_step``, the writer's test hook): while the new checkpoint is
written, before and after each rename, part-way through the removal of the replaced one, and during the
recovery of an earlier kill.  Killed before its commit point (the rename to ``.<name>.new``) the save is lost
and step 4's backup is the one kept; from then on, step 6's.  Then ``BackupAndRestore`` resumes at that step and
``fit`` ends with the weights of a run never interrupted, and removes the backup directory whole (nothing left
beside it); a load gives the kept checkpoint's weights and clears the rest; a save over the leftovers succeeds
and leaves nothing else beside its checkpoint.
"""
import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import flowlayers as flow
from flowlayers.framework import checkpoint_format as checkpoint

PROGRAMS = Path(__file__).resolve().parents[1] / "checkpoint_programs"
sys.path.insert(0, str(PROGRAMS))
import resume_fit  # noqa: E402

EPOCHS = 2      # 5 steps each; BackupAndRestore(save_freq=2) saves after steps 2, 4, 6 and 8


def fit(model, callbacks):
    x, y = resume_fit.data()
    return model.fit(x, y, batch_size=resume_fit.BATCH, epochs=EPOCHS, verbose=0, callbacks=callbacks)


def backup_at(step, backup_dir):
    """A backup ``fit`` wrote after ``step``, and the model's weights then."""
    flow.config.gpu_device_num(1)
    model = resume_fit.build()
    with pytest.raises(KeyboardInterrupt):
        fit(model, [flow.callbacks.BackupAndRestore(backup_dir, save_freq=2), resume_fit.InterruptAt(step)])
    return model.get_weights()


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """Step 4's backup, step 6's, their weights, and the weights of a run never interrupted."""
    root = tmp_path_factory.mktemp("runs")
    flow.config.gpu_device_num(1)
    flow.clear_session()
    reference = resume_fit.build()
    fit(reference, [])
    weights = {4: backup_at(4, root / "step4"), 6: backup_at(6, root / "step6")}
    return {"step4": root / "step4", "step6": root / "step6", "weights": weights,
            "reference": reference.get_weights()}


def kill(source, target, step, occurrence=1):
    done = subprocess.run([sys.executable, str(PROGRAMS / "kill_at_step.py"), source, target, step, str(occurrence)],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == -signal.SIGKILL, done.stderr[-3000:]


def same(a, b):
    return all(np.array_equal(x, y) for x, y in zip(a, b))


# (kills in order: step, occurrence; whether a backup was there before; the step of the backup kept)
CASES = {
    "writing the first file": ([("file written", 1)], True, 4),
    "writing the third file": ([("file written", 3)], True, 4),
    "its files written, before the lock": ([("temp complete", 1)], True, 4),
    "holding the lock, leftovers recovered": ([("locked", 1)], True, 4),
    "after the commit point": ([("staged", 1)], True, 6),
    "between the two renames": ([("moved aside", 1)], True, 6),
    "once the new one is in place": ([("committed", 1)], True, 6),
    "removing the old one, first file gone": ([("removing", 1)], True, 6),
    "removing the old one, 5 files gone": ([("removing", 5)], True, 6),
    "the old one removed, lock held": ([("old removed", 1)], True, 6),
    "recovering an earlier kill": ([("moved aside", 1), ("removing", 2)], True, 6),
    "a first save, before its commit point": ([("locked", 1)], False, 0),
    "a first save, after its commit point": ([("staged", 1)], False, 6),
}


@pytest.mark.slow
@pytest.mark.parametrize("case", list(CASES))
def test_a_save_killed_at_any_step_leaves_the_newest_complete_checkpoint(case, runs, tmp_path):
    kills, earlier, kept = CASES[case]
    backup = tmp_path / "run" / "backup"
    if earlier:
        shutil.copytree(runs["step4"], backup)
    for step, occurrence in kills:
        kill(runs["step6"] / "latest", backup / "latest", step, occurrence)
    assert sorted(checkpoint.STEPS) == sorted({"file written", "temp complete", "locked", "staged", "moved aside",
                                               "committed", "removing", "old removed"})
    for name in ("loaded", "saved"):
        shutil.copytree(tmp_path / "run", tmp_path / name, symlinks=True)
    assert checkpoint.exists(backup / "latest") == bool(kept)
    flow.config.gpu_device_num(1)

    # the next BackupAndRestore run resumes at the kept checkpoint's step and ends as a run never stopped
    model = resume_fit.build()
    first = resume_fit.FirstStep()
    fit(model, [flow.callbacks.BackupAndRestore(backup, save_freq=2), first])
    assert first.where[2] == kept
    assert max(float(np.abs(a - b).max()) for a, b in zip(model.get_weights(), runs["reference"])) < 1e-6
    assert not backup.exists()      # removed whole: nothing the kill left stayed beside it

    # the next load gives the kept checkpoint; a save after it leaves nothing but its checkpoint
    loaded = tmp_path / "loaded" / "backup"
    if kept:
        model.load_weights(loaded / "latest")
        assert same(model.get_weights(), runs["weights"][kept])
        assert sorted(os.listdir(loaded)) == ["latest"]     # the load itself finished or undid what was left
    model.save_weights(loaded / "latest")
    assert sorted(os.listdir(loaded)) == ["latest"]

    # and a save right after the kill, recovering on its own
    saved = tmp_path / "saved" / "backup"
    fresh = resume_fit.build()
    fresh.save_weights(saved / "latest")
    assert sorted(os.listdir(saved)) == ["latest"]
    model.load_weights(saved / "latest")
    assert same(model.get_weights(), fresh.get_weights())


def test_what_an_earlier_version_left_mid_removal_no_longer_wedges_the_path(runs, tmp_path):
    """Finding 2 as it was met: killed while removing ``<dir>.old``, a save of an earlier version left it with a
    few .npy files and no manifest, and every later save and BackupAndRestore run was refused.  That folder is not
    one the save uses now: it stays, and the backup resumes, saves and completes beside it."""
    backup = tmp_path / "backup"
    shutil.copytree(runs["step6"], backup)
    (backup / "latest.old").mkdir()
    for name in sorted(os.listdir(backup / "latest"))[:3]:
        shutil.copy(backup / "latest" / name, backup / "latest.old" / name)
    flow.config.gpu_device_num(1)
    model = resume_fit.build()
    first = resume_fit.FirstStep()
    fit(model, [flow.callbacks.BackupAndRestore(backup, save_freq=2), first])
    assert first.where[2] == 6
    assert max(float(np.abs(a - b).max()) for a, b in zip(model.get_weights(), runs["reference"])) < 1e-6
    assert sorted(os.listdir(backup)) == ["latest.old"]
    model.save_weights(backup / "latest")
    model.load_weights(backup / "latest")


def test_a_checkpoint_an_earlier_version_left_only_at_dir_old_is_read_there(runs, tmp_path):
    """Killed between its two renames, a save of an earlier version left the checkpoint at ``<dir>.old`` alone."""
    backup = tmp_path / "backup"
    backup.mkdir()
    shutil.copytree(runs["step6"] / "latest", backup / "latest.old")
    flow.config.gpu_device_num(1)
    assert checkpoint.exists(backup / "latest")
    model = resume_fit.build()
    model.load_weights(backup / "latest")
    assert same(model.get_weights(), runs["weights"][6])
