"""This process among the processes of a job (OneFlow's ``flow.env``).

    python -m flowlayers.launch --processes 2 train.py      # the same script in 2 processes
    srun --ntasks 2 python train.py                         # or SLURM, mpirun, a Kubernetes Indexed Job, TF_CONFIG

    flow.env.process_index()     # 0 or 1
    flow.env.process_count()     # 2

Whatever started the job, it is read once into one Cluster (``framework/detect.py``), and process 0 says in one
line what was found.  ``flow.env.init(...)`` gives what no system says, before the processes are first read.

A script written for one process runs unchanged in several: ``flow.config.gpu_device_num(n)`` counts the devices
of each process, the mesh spans all of them, and every process makes the same calls and receives the same full
logical values.  OneFlow 0.x configured its machines in the script (``flow.env.machine``, ``flow.env.ctrl_port``);
those calls are accepted with their meaning, and checked against what the launcher set up.
"""
import mmap
import os
import sys
from dataclasses import dataclass

from .errors import ConfigError
from .framework import cluster as _cluster
from .framework import detect as _detect

_state = {"cluster": False,     # the job's Cluster once read (None: one process); False: not read yet
          "detected": None,     # what started it (a detect.Detected), None for a process on its own
          "machines": None, "ctrl_port": None, "data_port": None,
          "heart": None}        # heartbeat: a _Heart; False without the launcher; None: not looked for yet


def cluster():
    """The job's Cluster: whatever started it (the launcher, SLURM, Open MPI, Kubernetes, TF_CONFIG; see
    ``framework/detect.py``), read once, unless ``init`` gave it; None in a process on its own."""
    if _state["cluster"] is False:
        _settle(_detect.detect())
    return _state["cluster"]


def _settle(detected):
    """Fix the job's processes for this process's life, and say on process 0 what started them."""
    _state["detected"], _state["cluster"] = detected, detected.cluster() if detected else None
    if detected is not None and detected.index == 0:
        sys.stderr.write(f"flowlayers: {detected.describe()}\n")
        sys.stderr.flush()


def init(coordinator_address=None, process_count=None, process_index=None, local_device_ids=None):
    """Say what no launcher says (JAX's ``jax.distributed.initialize`` arguments, with their meaning): the
    coordinator ``"host:port"`` (process 0's; the processes' servers listen on the ports after it), the number of
    processes and this one's index, and ``local_device_ids``, the GPUs of this host this process uses (it sets
    ``CUDA_VISIBLE_DEVICES``, picking among those already visible; a CPU host has no device ids to pick).
    Anything left None is detected as without the call; a value given must agree with the system that started
    the job.  Call it first: once the processes were read (``process_index``, ``gpu_device_num``, a model), they
    are fixed for the process's life, as the engines join them once."""
    what = (f"flow.env.init(coordinator_address={coordinator_address!r}, process_count={process_count!r}, "
            f"process_index={process_index!r}, local_device_ids={local_device_ids!r})")
    if _state["cluster"] is not False:
        now = _state["detected"].describe() if _state["detected"] else _detect.describe_nothing()
        raise ConfigError(f"{what}: expected to be called before this process's job was first read (by "
                          f"flow.env.process_index, flow.config.gpu_device_num, a model or an earlier init), "
                          f"received a call after it was read as {now}; call flow.env.init first in the script")
    if coordinator_address is not None:
        if not isinstance(coordinator_address, str):
            raise ConfigError(f"{what}: coordinator_address expected 'host:port', received {coordinator_address!r}")
        _detect.check_address(coordinator_address, f"{what}: coordinator_address")
    for name, value, low in (("process_count", process_count, 1), ("process_index", process_index, 0)):
        if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < low):
            raise ConfigError(f"{what}: {name} expected an integer >= {low}, received {value!r}")
    visible = _visible(local_device_ids, what)
    detected = _detect.given(_detect.detect(coordinator=coordinator_address), process_count, process_index,
                             coordinator_address, what)
    if visible is not None:
        os.environ["CUDA_VISIBLE_DEVICES"] = visible
    _settle(detected)


def _visible(ids, what):
    """``CUDA_VISIBLE_DEVICES`` for the device ids ``ids`` (an int or a sequence; ids among those visible now)."""
    if ids is None:
        return None
    ids = [ids] if isinstance(ids, int) and not isinstance(ids, bool) else ids
    if not isinstance(ids, (list, tuple)) or not ids or \
            any(isinstance(i, bool) or not isinstance(i, int) or i < 0 for i in ids) or len(set(ids)) != len(ids):
        raise ConfigError(f"{what}: local_device_ids expected distinct device ids >= 0 (an int or a list), "
                          f"received {ids!r}")
    now = [d for d in os.environ.get("CUDA_VISIBLE_DEVICES", "").split(",") if d.strip()]
    if now and max(ids) >= len(now):
        raise ConfigError(f"{what}: local_device_ids expected ids among the {len(now)} device(s) visible now "
                          f"(CUDA_VISIBLE_DEVICES={','.join(now)}), received {ids!r}")
    return ",".join(now[i] if now else str(i) for i in ids)


def speaks():
    """Whether this process prints what the job does (``fit``'s progress bar): process 0 speaks for the job, every
    process where ``$FLOWLAYERS_VERBOSE`` is set (the launcher's ``--verbose``)."""
    return process_index() == 0 or bool(os.environ.get(_cluster.VERBOSE))


def restart_point():
    """A point where the job can stop and start again without losing work: ``BackupAndRestore`` calls it in every
    process once a backup is in place.  Where the launcher asked for a restart (``--elastic``: a host's launcher
    came back), the process exits here with ``RESTART_CODE``, and the launcher starts the job again with the new
    membership, from this backup.  Otherwise (and without the launcher) it does nothing."""
    path = os.environ.get(_cluster.RESTART_POINT)
    if path and os.path.exists(path):
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(_cluster.RESTART_CODE)     # no cleanup that could wait on peers stopping here too


def started_by():
    """What started this job, in words (None: the process runs on its own)."""
    cluster()
    return _state["detected"].system if _state["detected"] else None


def process_index():
    """This process's index, 0 .. ``process_count() - 1`` (0 without the launcher)."""
    return cluster().index if cluster() else 0


def process_count():
    """The processes of this job (1 without the launcher)."""
    return cluster().count if cluster() else 1


def is_multi_client():
    """Whether this job has several processes (OneFlow's name)."""
    return process_count() > 1


def machine(*val):
    """OneFlow's list of the job's machines: ``machine([{"addr": "10.0.0.1"}, {"addr": "10.0.0.2"}])`` or
    ``machine("10.0.0.1", "10.0.0.2")``.  Here the launcher starts one set of processes per host (``--hosts``); the
    machines named must be those hosts, in order (one machine: this host alone)."""
    what = f"flow.env.machine({', '.join(map(repr, val))})"
    machines = val[0] if len(val) == 1 and isinstance(val[0], (list, tuple)) else list(val)
    addrs = []
    for m in machines:
        addr = m.get("addr") if isinstance(m, dict) else m
        if not isinstance(addr, str) or not addr:
            raise ConfigError(f"{what}: expected host addresses, as strings or dicts {{'addr': host}}, received "
                              f"{m!r}")
        addrs.append(addr)
    if not addrs:
        raise ConfigError(f"{what}: expected at least one machine, received none")
    hosts = list(cluster().hosts) if cluster() else ["127.0.0.1"]
    if hosts and (len(addrs) != len(hosts) or (len(addrs) > 1 and addrs != hosts)):
        how = ("start the script on every host with python -m flowlayers.launch --hosts "
               f"{','.join(addrs)} --host-index I --coordinator {addrs[0]}:PORT"
               if started_by() in (None, _detect.LAUNCHER) else f"name the hosts {started_by()} gave the job")
        raise ConfigError(f"{what}: expected the hosts this job was launched on, {hosts}, received {addrs}; {how}")
    _state["machines"] = addrs


def ctrl_port(val):
    """OneFlow's port for the control traffic between machines, the same on every machine.  Here it is the
    coordinator's port (``--coordinator HOST:PORT``); on one host the launcher picks free ports itself, and the
    value is recorded only."""
    what = _port(val, f"flow.env.ctrl_port({val!r})")
    if cluster() and len(cluster().hosts) > 1 and not cluster().coordinator.endswith(f":{val}"):
        raise ConfigError(f"{what}: expected the coordinator port of this job's launcher "
                          f"({cluster().coordinator}), received {val}; pass --coordinator HOST:{val} to the launcher "
                          f"on every host, or drop the call")
    _state["ctrl_port"] = val


def data_port(val):
    """OneFlow's port for data between machines; the engines pick their own (recorded only)."""
    _port(val, f"flow.env.data_port({val!r})")
    _state["data_port"] = val


def _port(val, what):
    """``what`` if ``val`` is a port number, else a ConfigError naming it."""
    if isinstance(val, bool) or not isinstance(val, int) or not 0 < val < 65536:
        raise ConfigError(f"{what}: expected a port number 1..65535, received {val!r}")
    return what


def heartbeat(steps=1):
    """Tell the launcher how far this process has come: ``steps`` steps begin now (each step calls it; 0: a program
    is being compiled).  Every process of a job passes these stages in the same order, so a process whose peers
    have begun a stage it has not is the one they wait on (``flowlayers/launch_watch.py``).  Each call rewrites
    the record of the file ``$FLOWLAYERS_HEARTBEAT`` names, mapped into memory (about a microsecond); without the
    launcher it does nothing."""
    if _state["heart"] is None:
        _state["heart"] = _heart()
    heart = _state["heart"]
    if heart:
        heart.beats += 1
        heart.steps += steps
        _cluster.HEARTBEAT_RECORD.pack_into(heart.record, 0, heart.beats, heart.steps, steps > 0, heart.beats)


@dataclass
class _Heart:
    record: mmap.mmap       # the launcher's heartbeat file of this process, mapped into memory
    beats: int = 0          # stages begun
    steps: int = 0          # steps begun


def _heart():
    """This process's _Heart; False without the launcher."""
    path = os.environ.get(_cluster.HEARTBEAT)
    if not path:
        return False
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
    try:
        os.ftruncate(fd, _cluster.HEARTBEAT_RECORD.size)
        return _Heart(mmap.mmap(fd, _cluster.HEARTBEAT_RECORD.size))
    finally:
        os.close(fd)
