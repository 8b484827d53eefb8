"""The jax backend's own behaviour, beyond what the whole suite checks on every backend."""
import os
import subprocess
import sys
from pathlib import Path

import pytest

import flowlayers as flow

pytestmark = pytest.mark.skipif(flow.config.backend_name() != "jax", reason="about the jax backend")

PROGRAMS = Path(__file__).resolve().parent / "checkpoint_programs"


@pytest.mark.parametrize("view", ["consistent", "mirrored"])
def test_steps_dispatched_ahead_on_several_cpu_devices_finish(view):
    """Two steps with all-reduces in flight at once deadlocked XLA:CPU on 4 logical devices and 2 cores (the
    process aborted after 40 s); a step now waits for the one before it."""
    done = subprocess.run([sys.executable, str(PROGRAMS / "steps_in_flight.py"), "jax", view], capture_output=True,
                          text=True, timeout=240, env=dict(os.environ, XLA_FLAGS=""))
    assert done.returncode == 0, done.stderr[-2000:]
    assert "trained 62 steps" in done.stdout
