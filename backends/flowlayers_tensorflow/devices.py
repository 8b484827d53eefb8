"""Devices: GPUs where present, else N logical CPU devices configured before TF initialises.

Which devices exist: on a GPU host, its GPUs.  On a CPU host flowlayers splits
the CPU into logical devices: at the first ``flow.config.gpu_device_num`` (or
mesh, or model) it records, without starting TensorFlow, that TF is to make
``max(n, $FLOWLAYERS_CPU_DEVICES)`` of them when it starts (8 when the variable
is unset: they cost nothing while unused).  TF cannot add logical devices once it has started,
so from then on only those exist (an 8-device process serves 1-, 2-, 4- and
8-device runtimes from a prefix).  Where other code started TF before
flowlayers, TF's own logical CPU devices (usually one) are all there is.
"""
import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import tensorflow as tf  # noqa: E402

from flowlayers.errors import ConfigError  # noqa: E402

DEFAULT_CPU_DEVICES = 8
_cpu = {"count": None, "by": None}   # logical CPU devices once TF started, and who started it


def devices(n):
    """Names of the first ``n`` devices of this host (``/device:GPU:i`` or ``/device:CPU:i``)."""
    check(n, f"flow.config.gpu_device_num({n})")
    return [f"/device:{'GPU' if tf.config.list_physical_devices('GPU') else 'CPU'}:{i}" for i in range(n)]


def _reserve_cpu(want):
    """Ask TensorFlow for ``want`` logical CPU devices when it starts; it is not started here."""
    cpu = tf.config.list_physical_devices("CPU")[0]
    try:
        tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * want)
        _cpu["by"], _cpu["count"] = "flowlayers", want
    except RuntimeError:   # TF already started (the user touched TF first): use what it has
        _cpu["by"], _cpu["count"] = "other code", len(tf.config.list_logical_devices("CPU"))


def check(n, what):
    """Raise ConfigError naming ``what`` if this process cannot give ``n`` devices.  On a CPU host the logical
    devices are asked for here if TensorFlow has not started yet (``flow.config.gpu_device_num`` calls this);
    nothing is started."""
    gpus = tf.config.list_physical_devices("GPU")
    if not gpus and _cpu["count"] is None:
        _reserve_cpu(max(n, int(os.environ.get("FLOWLAYERS_CPU_DEVICES", "") or DEFAULT_CPU_DEVICES)))
    have = len(gpus) or _cpu["count"]
    if n <= have:
        return
    if gpus:
        why, fix = f"this host has {have} GPU(s)", f"use at most {have}"
    elif _cpu["by"] == "flowlayers":
        why = (f"this process started TensorFlow with {have} logical CPU device(s), and TensorFlow cannot add "
               f"logical devices after it starts")
        fix = (f"use at most {have}, or in a new process set FLOWLAYERS_CPU_DEVICES={n} (or call "
               f"flow.config.gpu_device_num({n})) before the first model runs")
    else:
        why = (f"TensorFlow was started by code that ran before flowlayers could configure devices, with {have} "
               f"logical CPU device(s), and it cannot add logical devices after it starts")
        fix = f"call flow.config.gpu_device_num({n}) before any TensorFlow code runs, or use at most {have}"
    raise ConfigError(f"{what}: expected at most {have} devices, received {n}: {why}; {fix}")


def is_gpu(device):
    return "GPU" in device.upper()
