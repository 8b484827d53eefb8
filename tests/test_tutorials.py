"""The tutorials run end to end (``--smoke``: a few batches), in each view, as a user runs them."""
import os
import subprocess
import sys
from pathlib import Path

import pytest

TUTORIALS = Path(__file__).resolve().parents[1] / "tutorials"


@pytest.mark.parametrize("view", ["mirrored", "consistent"])
def test_quickstart_smoke(view, tmp_path):
    env = dict(os.environ, FLOWLAYERS_CPU_DEVICES="2", TF_CPP_MIN_LOG_LEVEL="3")
    env.pop("FLOWLAYERS_VIEW", None)
    result = subprocess.run([sys.executable, str(TUTORIALS / "01_quickstart.py"), "--smoke", "--view", view,
                             "--devices", "2"], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, f"exit {result.returncode}\n{result.stdout[-3000:]}\n{result.stderr[-3000:]}"
    assert f"view: {view}, devices: 2" in result.stdout
    assert "test accuracy:" in result.stdout
