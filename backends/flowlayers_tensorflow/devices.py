"""Devices: GPUs where present, else N logical CPU devices configured before TF initialises.

TF can split its CPU into logical devices only once per process, so the first
runtime configures ``max(n, $FLOWLAYERS_CPU_DEVICES)`` of them; later runtimes
use a prefix (a 4-device process serves 1-, 2- and 4-device runtimes).
"""
import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import tensorflow as tf  # noqa: E402

from flowlayers.errors import ConfigError  # noqa: E402

_configured = {"cpu": None}


def devices(n):
    """Names of the first ``n`` devices of this host (``/device:GPU:i`` or ``/device:CPU:i``)."""
    gpus = tf.config.list_physical_devices("GPU")
    if gpus:
        if n > len(gpus):
            raise ConfigError(f"flow.config.gpu_device_num({n}): expected at most the {len(gpus)} GPU(s) of this "
                              f"host, received {n}")
        return [f"/device:GPU:{i}" for i in range(n)]
    want = max(n, int(os.environ.get("FLOWLAYERS_CPU_DEVICES", "1") or 1))
    if _configured["cpu"] is None:
        cpu = tf.config.list_physical_devices("CPU")[0]
        try:
            tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * want)
        except RuntimeError:
            pass  # TF already started (the user touched TF first): use what it has
        _configured["cpu"] = len(tf.config.list_logical_devices("CPU"))
    have = _configured["cpu"]
    if n > have:
        raise ConfigError(
            f"flow.config.gpu_device_num({n}): this process already started TensorFlow with {have} logical CPU "
            f"device(s); expected at most {have}. Set the device count (or FLOWLAYERS_CPU_DEVICES={n}) before the "
            f"first model runs, or run in a new process")
    return [f"/device:CPU:{i}" for i in range(n)]


def is_gpu(device):
    return "GPU" in device.upper()
