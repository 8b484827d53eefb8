"""This process among the processes of a job (OneFlow's ``flow.env``).

    python -m flowlayers.launch --processes 2 train.py      # the same script in 2 processes

    flow.env.process_index()     # 0 or 1
    flow.env.process_count()     # 2

A script written for one process runs unchanged in several: ``flow.config.gpu_device_num(n)`` counts the devices
of each process, the mesh spans all of them, and every process makes the same calls and receives the same full
logical values.  OneFlow 0.x configured its machines in the script (``flow.env.machine``, ``flow.env.ctrl_port``);
those calls are accepted with their meaning, and checked against what the launcher set up.
"""
import mmap
import os
from dataclasses import dataclass

from .errors import ConfigError
from .framework import cluster as _cluster

_state = {"cluster": False, "machines": None, "ctrl_port": None, "data_port": None,
          "heart": None}        # heartbeat: a _Heart; False without the launcher; None: not looked for yet


def cluster():
    """The job's Cluster (``framework/cluster.py``), read from the launcher's environment once; None in a process
    started on its own."""
    if _state["cluster"] is False:
        _state["cluster"] = _cluster.from_environment()
    return _state["cluster"]


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
    if len(addrs) != len(hosts) or (len(addrs) > 1 and addrs != hosts):
        raise ConfigError(f"{what}: expected the hosts this job was launched on, {hosts}, received {addrs}; start "
                          f"the script on every host with python -m flowlayers.launch --hosts "
                          f"{','.join(addrs)} --host-index I --coordinator {addrs[0]}:PORT")
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
