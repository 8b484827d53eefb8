"""Devices: GPUs where JAX has them, else N logical CPU devices configured before JAX starts.

As for the tensorflow backend: on a CPU host the first ``flow.config.gpu_device_num`` (or mesh) records, without
starting JAX, that its CPU platform is to make ``max(n, $FLOWLAYERS_CPU_DEVICES)`` devices (8 when unset); JAX
cannot add devices once its backends are initialised, so from then on only those exist (an export, or loading one,
that starts JAX first reserves them as well: ``reserve``).  Where a GPU plugin is installed, how many GPUs there are
is known only once JAX starts: the check waits for the first runtime.

Several processes (``join``): each joins JAX's distributed runtime before JAX starts and reserves its own devices
(``n`` counts one process's); the mesh takes the first ``local`` devices of process 0, then of process 1, ...
"""
import importlib.util
import os
import socket
import time

import jax

from flowlayers.backend_common import device_count_error
from flowlayers.errors import ConfigError

# flowlayers' dtypes include float64 and int64 (argmax, labels, casts): 64-bit types on, before this backend makes
# any array (every path that starts JAX passes here first: a runtime, an export, loading one).  Every array the
# backend makes names its dtype, so float32 models stay float32.
jax.config.update("jax_enable_x64", True)

DEFAULT_CPU_DEVICES = 8
JOIN_SECONDS = 300          # how long a process waits for the coordinator (JAX's own initialization_timeout)
GPU_PLUGINS = ("jax_cuda13_plugin", "jax_cuda12_plugin", "jax_rocm7_plugin", "jax_rocm60_plugin")
_cpu = {"count": None, "by": None}      # the CPU devices asked for, and who started JAX
_joined = [None]                        # the Cluster this process joined JAX's distributed runtime with


def gpu_plugin_installed():
    return any(importlib.util.find_spec(name) is not None for name in GPU_PLUGINS)


def devices(n, what=None, cluster=None):
    """The first ``n`` devices of JAX's default platform (starts JAX); with a cluster, ``n`` over all processes:
    the first ``cluster.local(n)`` of each process, process by process (global device ``p * local + d``)."""
    local = cluster.local(n) if cluster else n
    check(local, what or f"flow.config.gpu_device_num({local})", start=True)
    if cluster is None:
        return jax.devices()[:n]
    if jax.process_count() != cluster.count:
        raise ConfigError(f"JAX's distributed runtime: expected {cluster.count} processes (the launcher's), received "
                          f"{jax.process_count()}; start every process with python -m flowlayers.launch")
    owned = [sorted((d for d in jax.devices() if d.process_index == p), key=lambda d: d.id)
             for p in range(cluster.count)]
    short = [p for p, ds in enumerate(owned) if len(ds) < local]
    if short:
        raise ConfigError(f"flow.config.gpu_device_num({local}): expected {local} devices in every process, received "
                          f"{[len(ds) for ds in owned]} (per process); give every process as many devices")
    return [d for ds in owned for d in ds[:local]]


def join(cluster):
    """Join JAX's distributed runtime as ``cluster`` (flowlayers' Cluster) says, once per process and before JAX
    starts (``check`` does not start it on a CPU host).  A later runtime must name the same cluster."""
    if _joined[0] is not None or cluster is None:
        if cluster != _joined[0]:
            raise ConfigError(f"runtime: expected the processes this one already joined JAX's distributed runtime "
                              f"with ({_joined[0]}), received {cluster}; JAX joins one cluster per process")
        return
    where = (f"jax.distributed.initialize(coordinator_address={cluster.coordinator!r}, "
             f"num_processes={cluster.count}, process_id={cluster.index})")
    if cluster.index:
        _reach(cluster.coordinator, where)
    try:
        # CPU collectives between processes: gloo (without it XLA:CPU has none across processes)
        jax.config.update("jax_cpu_collectives_implementation", "gloo")
        jax.distributed.initialize(coordinator_address=cluster.coordinator, num_processes=cluster.count,
                                   process_id=cluster.index)
    except Exception as e:   # JAX started already (RuntimeError), or the coordinator cannot be reached
        raise ConfigError(f"{where}: expected to join the job's distributed runtime before JAX starts, received "
                          f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}; build no JAX arrays "
                          f"before the first model runs, and start every process with python -m flowlayers.launch"
                          ) from None
    _joined[0] = cluster


def _reach(address, where):
    """Wait until process 0's coordination service at ``address`` accepts connections: JAX aborts the process
    (no exception) where it cannot register with it in time."""
    host, port = address.rsplit(":", 1)
    seconds, error = JOIN_SECONDS, None
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            socket.create_connection((host, int(port)), timeout=5).close()
            return
        except OSError as e:
            error = e
            time.sleep(0.2)
    raise ConfigError(f"{where}: expected process 0's coordination service to accept connections at {address} "
                      f"within {seconds} s, received {error!r}; check that process 0 runs and that this host reaches "
                      f"it (the launcher's --coordinator)")


def reserve(n=1):
    """Before this backend starts JAX: its CPU platform asked for ``max(n, $FLOWLAYERS_CPU_DEVICES)`` devices, once
    per process.  Every path that starts JAX passes here (a runtime through ``check``; an export or loading one
    directly): JAX started by one of them with its default single CPU device would leave a later runtime short."""
    if _cpu["count"] is None:
        _reserve_cpu(max(n, int(os.environ.get("FLOWLAYERS_CPU_DEVICES", "") or DEFAULT_CPU_DEVICES)))


def _reserve_cpu(want):
    """Ask JAX's CPU platform for ``want`` devices when it starts; it is not started here."""
    try:
        jax.config.update("jax_num_cpu_devices", want)
        _cpu["by"], _cpu["count"] = "flowlayers", want
    except RuntimeError:    # JAX already started (the user ran JAX first): use what it has
        _cpu["by"], _cpu["count"] = "other code", jax.local_device_count("cpu")


def check(n, what, start=False):
    """Raise ConfigError naming ``what`` if this process cannot give ``n`` devices.  Nothing is started unless
    ``start`` (a runtime is being made) or JAX has GPUs to count."""
    reserve(n)
    if start:
        platform = jax.default_backend()
    elif gpu_plugin_installed():
        return      # counted when the first runtime starts JAX
    else:
        platform = "cpu"    # known without starting JAX
    have = jax.local_device_count() if platform != "cpu" else _cpu["count"]
    if n > have:
        raise device_count_error(what, n, have, platform, "JAX", _cpu["by"] == "flowlayers")
