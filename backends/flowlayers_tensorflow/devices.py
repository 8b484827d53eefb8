"""Devices: GPUs where present, else N logical CPU devices configured before TF initialises.

Which devices exist: on a GPU host, its GPUs.  On a CPU host flowlayers splits
the CPU into logical devices: at the first ``flow.config.gpu_device_num`` (or
mesh, or model) it records, without starting TensorFlow, that TF is to make
``max(n, $FLOWLAYERS_CPU_DEVICES)`` of them when it starts (8 when the variable
is unset: they cost nothing while unused).  TF cannot add logical devices once it has started,
so from then on only those exist (an 8-device process serves 1-, 2-, 4- and
8-device runtimes from a prefix).  Where other code started TF before
flowlayers, TF's own logical CPU devices (usually one) are all there is.

Several processes (a Cluster, ``join``): each process reserves its own devices (``n`` counts one process's) and
joins TF's distributed runtime once, before TF's context starts: DTensor multi-client for the consistent view,
MultiWorkerMirroredStrategy for the mirrored view.  Both configure TF's collective runtime, which a process does
once (measured: MWMS after DTensor raises "Collective ops are already configured", DTensor after MWMS "TensorFlow
has already been initialized"), so a process runs one of the two views.  Global device ``p * local + d`` is device
``d`` of process ``p``: the order of ``dtensor.create_distributed_mesh`` (client ``p`` holds ids
``p * local .. (p + 1) * local - 1``).
"""
import json
import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import tensorflow as tf  # noqa: E402

from flowlayers.backend_common import device_count_error  # noqa: E402
from flowlayers.errors import ConfigError  # noqa: E402

DEFAULT_CPU_DEVICES = 8
_cpu = {"count": None, "by": None}   # logical CPU devices once TF started, and who started it
# the TF runtime this process joined: its Cluster, which ("dtensor" | "mwms"), the view that joined, the MWMS
_joined = {"cluster": None, "runtime": None, "view": None, "strategy": None, "local": None}
RUNTIMES = {"consistent": "dtensor", "mirrored": "mwms"}
NAMES = {"dtensor": "DTensor multi-client", "mwms": "MultiWorkerMirroredStrategy"}


def devices(n, cluster=None):
    """Names of the first ``n`` devices of this host (``/device:GPU:i`` or ``/device:CPU:i``); with a cluster, ``n``
    counts all processes' devices and these are this process's ``cluster.local(n)``."""
    n = cluster.local(n) if cluster else n
    check(n, f"flow.config.gpu_device_num({n})")
    return [f"/device:{_kind()}:{i}" for i in range(n)]


def _kind():
    return "GPU" if tf.config.list_physical_devices("GPU") else "CPU"


def join(view, cluster, local):
    """Join TF's distributed runtime for ``view`` as ``cluster`` says, once per process and before TF's context
    starts; ``local``: this process's devices.  Returns the MultiWorkerMirroredStrategy (mirrored view) or None.
    A later runtime must name the same cluster, view's runtime and device count."""
    kind = RUNTIMES[view]
    if _joined["cluster"] is not None:
        if cluster != _joined["cluster"]:
            raise ConfigError(f"runtime: expected the processes this one already joined TF's distributed runtime with "
                              f"({_joined['cluster']}), received {cluster}; TF joins one cluster per process")
        if kind != _joined["runtime"]:
            raise ConfigError(
                f"view {view!r}: expected the view this process already runs over {cluster.count} processes, "
                f"{_joined['view']!r} (on {NAMES[_joined['runtime']]}), received {view!r} (on {NAMES[kind]}): both "
                f"configure TF's collective runtime, which a process does once; run the {view!r} view in a job of "
                f"its own (a new python -m flowlayers.launch), or keep the {_joined['view']!r} view in this one")
        if kind == "mwms" and local != _joined["local"]:
            raise ConfigError(f"mirrored view: expected the {_joined['local']} device(s) per process this process's "
                              f"MultiWorkerMirroredStrategy was made with, received {local}; use one device count per "
                              f"job")
        return _joined["strategy"]
    check(local, f"flow.config.gpu_device_num({local})")       # reserves the logical CPU devices if not yet
    if len(cluster.addresses) != cluster.count:
        raise ConfigError(f"{NAMES[kind]} ({view!r} view, process {cluster.index} of {cluster.count}): expected the "
                          f"address of every process's server, received {len(cluster.addresses)}: what started the "
                          f"job does not say which host runs which process (mpirun over several nodes); start it "
                          f"with srun, python -m flowlayers.launch or TF_CONFIG, or run the jax backend")
    try:
        strategy = _join_dtensor(cluster) if kind == "dtensor" else _join_mwms(cluster, local)
    except (ValueError, RuntimeError) as e:     # TF's context started already, or a peer cannot be reached
        raise ConfigError(f"{NAMES[kind]} ({view!r} view, process {cluster.index} of {cluster.count}): expected to "
                          f"join TF's distributed runtime before TensorFlow starts, received {type(e).__name__}: "
                          f"{str(e).splitlines()[0] if str(e) else ''}; run no TensorFlow code before the first "
                          f"model runs, and start every process with python -m flowlayers.launch") from None
    _joined.update(cluster=cluster, runtime=kind, view=view, strategy=strategy, local=local)
    return strategy


def _join_dtensor(cluster):
    """DTensor multi-client: one client per process, its job's tasks at ``cluster.addresses``."""
    from tensorflow.experimental import dtensor

    os.environ.update(DTENSOR_CLIENT_ID=str(cluster.index), DTENSOR_NUM_CLIENTS=str(cluster.count),
                      DTENSOR_JOB_NAME="worker", DTENSOR_JOBS=",".join(cluster.addresses))
    # the logical CPU devices reserved (``check``), again: DTensor sets them itself
    dtensor.initialize_accelerator_system(_kind(), num_logical_cpu_devices=_cpu["count"])
    return None


def _join_mwms(cluster, local):
    """A MultiWorkerMirroredStrategy (TF_CONFIG from the cluster) with one replica per device of every process.

    On a CPU host MWMS takes ONE CPU device per worker (``CollectiveAllReduceExtended._initialize_local_devices``
    returns ``CPU:0`` alone); that method (TF internal: ``(cluster_resolver, worker_device) -> (device names,
    device type)``) is replaced while the strategy is made, so that its replicas are the first ``local`` devices of
    this process.  Its collective group keys start apart from the steps' own (``mirrored.py``)."""
    os.environ["TF_CONFIG"] = json.dumps({"cluster": {"worker": list(cluster.addresses)},
                                          "task": {"type": "worker", "index": cluster.index}})
    from tensorflow.python.distribute import collective_all_reduce_strategy as cars

    kind = _kind()

    def local_devices(self, cluster_resolver, worker_device):
        return tuple(f"{worker_device}/device:{kind}:{i}" for i in range(local)), kind

    cls = type("MultiWorkerMirroredStrategy", (tf.distribute.MultiWorkerMirroredStrategy,),
               {"_collective_key_base": 500_000_000})
    extended, original = cars.CollectiveAllReduceExtended, cars.CollectiveAllReduceExtended._initialize_local_devices
    extended._initialize_local_devices = local_devices
    try:
        strategy = cls()
    finally:
        extended._initialize_local_devices = original
    if strategy.num_replicas_in_sync != local * cluster.count:
        raise RuntimeError(f"MultiWorkerMirroredStrategy has {strategy.num_replicas_in_sync} replicas, expected "
                           f"{local} per process")
    return strategy


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
    if n > have:
        raise device_count_error(what, n, have, "gpu" if gpus else "cpu", "TensorFlow", _cpu["by"] == "flowlayers")


def is_gpu(device):
    return "GPU" in device.upper()
