"""Two processes saving to one path at once never delete each other's work (issue 37, finding 3).

Each save writes its own temporary directory (named by its process, host and a random part), removes only
those of writers no longer running, and swaps under an exclusive lock of ``.<name>.lock``; a load reads under a
shared one.  Two writers x 20 saves, each followed by a load: every save succeeds (the later one wins) or is
refused by a named CheckpointError, every load sees one save's weights whole, and the path ends as one complete
checkpoint, the last save of one writer, with nothing beside it.
"""
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import flowlayers as flow

PROGRAMS = Path(__file__).resolve().parents[1] / "checkpoint_programs"
sys.path.insert(0, str(PROGRAMS))
import concurrent_saves  # noqa: E402

SAVES = 20


@pytest.mark.slow
def test_two_writers_to_one_path_end_with_one_complete_checkpoint(tmp_path):
    target = tmp_path / "shared" / "ckpt"
    env = dict(os.environ, FLOWLAYERS_CPU_DEVICES="1", TF_CPP_MIN_LOG_LEVEL="3")
    writers = [subprocess.Popen([sys.executable, str(PROGRAMS / "concurrent_saves.py"), str(target), str(k),
                                 str(SAVES), str(tmp_path / "ready")], env=env, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True) for k in (1, 2)]
    results = []
    for writer in writers:
        out, err = writer.communicate(timeout=600)
        assert writer.returncode == 0, err[-3000:]
        results.append(json.loads(out.strip().splitlines()[-1]))

    written = {1000 * k + i for k in (1, 2) for i in range(SAVES)}
    for result in results:
        for outcome in result["saves"]:
            assert outcome == "saved" or repr(str(target)) in outcome, outcome
        for loaded in result["loads"]:
            assert loaded in written, loaded           # one save's weights, whole
    assert sorted(os.listdir(target.parent)) == ["ckpt"]
    flow.config.gpu_device_num(1)
    model = concurrent_saves.build()
    model.load_weights(target)
    assert concurrent_saves.one_value(model) in {1000 * k + SAVES - 1 for k in (1, 2)}
    assert all(np.unique(w).size == 1 for w in model.get_weights())


def test_a_save_that_waits_too_long_for_another_is_refused_by_name_and_changes_nothing(tmp_path, monkeypatch):
    """The loser of a race that does not end (the other save holds the lock past LOCK_WAIT): a CheckpointError
    naming the process that holds it; its temporary directory removed, the checkpoint as the other left it."""
    from flowlayers.framework import checkpoint_format as checkpoint

    flow.config.gpu_device_num(1)
    model = concurrent_saves.build()
    model.save_weights(tmp_path / "ckpt")
    saved = model.get_weights()
    model.set_weights([w + 1 for w in saved])
    monkeypatch.setattr(checkpoint, "LOCK_WAIT", 0.2)
    with checkpoint._Lock(str(tmp_path / "ckpt"), exclusive=True), pytest.raises(flow.CheckpointError) as e:
        model.save_weights(tmp_path / "ckpt")       # another save of this path holds the lock meanwhile
    assert f"checkpoint {str(tmp_path / 'ckpt')!r}: expected to save it once the save or load of it under way is " \
           f"done, but process {os.getpid()} on host {checkpoint.HOST} held its lock {tmp_path / '.ckpt.lock'} for " \
           f"over 0.2 s; stop that process if it is stuck, or use another path" == str(e.value)
    assert sorted(os.listdir(tmp_path)) == ["ckpt"]
    model.load_weights(tmp_path / "ckpt")
    assert all(np.array_equal(a, b) for a, b in zip(model.get_weights(), saved))
