"""The error for more devices than a process can have."""
from ..errors import ConfigError


def device_count_error(what, n, have, platform, engine, started_by_flowlayers):
    """The error for ``n`` devices asked of a process that can give ``have`` (``platform``: "cpu" or an
    accelerator's name; ``engine``: "TensorFlow" or "JAX", which cannot add CPU devices once started, by us or by
    code that ran first)."""
    if platform != "cpu":
        why, fix = f"this host has {have} {platform.upper()} device(s)", f"use at most {have}"
    elif started_by_flowlayers:
        why = (f"this process started {engine} with {have} CPU device(s), and {engine} cannot add devices after it "
               f"starts")
        fix = (f"use at most {have}, or in a new process set FLOWLAYERS_CPU_DEVICES={n} (or call "
               f"flow.config.gpu_device_num({n})) before the first model runs")
    else:
        why = (f"{engine} was started by code that ran before flowlayers could configure devices, with {have} CPU "
               f"device(s), and it cannot add devices after it starts")
        fix = f"call flow.config.gpu_device_num({n}) before any {engine} code runs, or use at most {have}"
    return ConfigError(f"{what}: expected at most {have} devices, received {n}: {why}; {fix}")
