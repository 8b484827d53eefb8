"""The TensorFlow backend's devices: a device count set in flowlayers reserves TensorFlow's logical CPU devices
without starting TensorFlow (``flowlayers_tensorflow.devices``)."""
import subprocess
import sys
import textwrap

import pytest

pytestmark = [pytest.mark.tensorflow_backend, pytest.mark.slow]     # each test starts a process

NOTHING_STARTED = """
import flowlayers as flow
from tensorflow.python.eager import context
flow.config.gpu_device_num(2)
flow.config.set_mesh(data=2)
print("STARTED", context.context()._context_handle is not None)
import tensorflow as tf
print("DEVICES", len(tf.config.list_logical_devices("CPU")))
"""


@pytest.mark.slow
def test_setting_devices_starts_no_engine():
    out = subprocess.run([sys.executable, "-c", textwrap.dedent(NOTHING_STARTED)], text=True, capture_output=True,
                         timeout=300, env={"PATH": "/usr/bin:/bin", "FLOWLAYERS_CPU_DEVICES": "3"})
    assert out.returncode == 0, out.stderr[-3000:]
    assert "STARTED False" in out.stdout and "DEVICES 3" in out.stdout, out.stdout
