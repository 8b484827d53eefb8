"""A LossScaleOptimizer's state (scale, counter, skipped steps) is checkpointed with the slots and comes back
exactly: from ``save_weights`` into another view, and after a SIGKILL in the middle of ``fit``."""
import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import resume_loss_scale
from keras_runs import mlp, train, use
from test_loss_scale import CASE, data, state

import flowlayers as flow

PROGRAM = Path(resume_loss_scale.__file__)


def test_save_and_load_bring_the_loss_scale_back_exactly_in_another_view(tmp_path):
    case = {**CASE, "loss_scale": {"initial_scale": 2.0 ** 20, "dynamic_growth_steps": 2}}
    xs, ys = data(steps=8)
    use("2x2")
    model = mlp(case)
    start = model.get_weights()
    train(model, xs[:5], ys[:5])
    saved_weights, saved_slots = state(model)
    assert saved_slots["loss_scale_optimizer/dynamic_scale"] != 2.0 ** 20     # it moved
    model.save_weights(tmp_path / "ckpt")
    continued = train(model, xs[5:], ys[5:])

    for place in ("mirrored2", "2x2"):
        use(place)
        loaded = mlp(case, start)
        loaded.load_weights(tmp_path / "ckpt")
        weights, slots = state(loaded)
        assert sorted(slots) == sorted(saved_slots) and loaded.optimizer.iterations == 5
        assert all(np.array_equal(slots[k], saved_slots[k]) for k in slots), place
        assert all(np.array_equal(a, b) for a, b in zip(weights, saved_weights)), place
    again = train(loaded, xs[5:], ys[5:])           # in the view that saved it: on as if never stopped
    assert (again[1], again[2]) == (continued[1], continued[2])
    assert all(np.array_equal(a, b) for a, b in zip(again[0], continued[0]))


def test_a_checkpoint_without_loss_scale_leaves_it_as_it_is_and_says_so(tmp_path):
    use("one")
    plain = mlp({**CASE, "policy": "float32"})
    plain.save_weights(tmp_path / "plain")
    use("one")
    scaled = mlp(CASE)
    with pytest.warns(UserWarning, match="optimizer state is not restored"):
        scaled.load_weights(tmp_path / "plain")
    assert scaled.optimizer.dynamic_scale == 2.0 ** 15


@pytest.mark.slow
@pytest.mark.parametrize("view", ["consistent", "mirrored"])
def test_sigkilled_fit_resumes_the_loss_scale_exactly(view, tmp_path):
    backup, out = tmp_path / "backup", tmp_path / "out.npz"
    command = (view, backup, out, "--kill-once-at", 9)       # backups after steps 2, 4, 6, 8
    killed = run(*command)
    assert killed.returncode == -signal.SIGKILL, killed.stderr[-3000:]
    rerun = run(*command)
    assert rerun.returncode == 0, rerun.stderr[-3000:]
    result = np.load(out)
    meta = json.loads(str(result["meta"]))
    assert meta["first_step"] == [1, 3, 8]

    reference, _ = resume_loss_scale.train(view)
    assert meta["loss_scale"] == resume_loss_scale.loss_scale_state(reference)
    assert meta["loss_scale"][2] > 0 and meta["loss_scale"][0] != 2.0 ** 24      # it skipped steps and moved
    weights = [result[f"arr_{i}"] for i in range(len(reference.weights))]
    assert all(np.array_equal(a, b) for a, b in zip(weights, reference.get_weights()))


def run(*args):
    env = dict(os.environ, FLOWLAYERS_CPU_DEVICES="4", TF_CPP_MIN_LOG_LEVEL="3")
    env.pop("FLOWLAYERS_VIEW", None)
    return subprocess.run([sys.executable, str(PROGRAM), *map(str, args)], env=env, capture_output=True, text=True,
                          timeout=300)
