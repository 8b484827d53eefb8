"""A tutorial's output holds no engine warnings: tutorial 02 in smoke mode on the tensorflow backend trains a model
in three places (each its own compiled steps) and TensorFlow warns of no retracing, nor of anything else.
(TensorFlow counted the traces of every executable's step as retracing of one function, keyed by the method's
code: four warnings; the last, smaller batch of an evaluation is one trace more of its own step, not a warning.)"""
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

TUTORIAL = Path(__file__).resolve().parents[1] / "tutorials" / "02_consistent_vs_mirrored.py"


@pytest.mark.slow
@pytest.mark.needs_tensorflow     # runs the tutorials on the tensorflow backend
def test_tutorial_02_prints_no_engine_warning(tmp_path):
    env = dict(os.environ, FLOWLAYERS_BACKEND="tensorflow", FLOWLAYERS_CPU_DEVICES="2", MPLBACKEND="Agg")
    for name in ("FLOWLAYERS_VIEW", "TF_CPP_MIN_LOG_LEVEL"):      # as a user runs it: the backend's own log level
        env.pop(name, None)
    done = subprocess.run([sys.executable, str(TUTORIAL), "--smoke", "--devices", "2"], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "same weights in every place (to 1e-5): True" in done.stdout
    output = done.stdout + done.stderr
    assert "retracing" not in output
    assert not re.search(r"WARNING:tensorflow|\w+Warning: ", output), output[-3000:]
