"""Where a launched process stands: the environment the launcher sets, read into a ``contract.Cluster``.

``python -m flowlayers.launch`` starts the processes and tells each, through the environment, where it stands;
``flow.env`` reads it once (``cluster()``, through ``detect.py``, which also knows the other systems that start
jobs) and the Placement hands it down to the backend, which joins its engine's own distributed runtime with it.
"""
import os
import struct

from ..contract import Cluster
from ..errors import ConfigError

# what the launcher sets in each process's environment
INDEX, COUNT = "FLOWLAYERS_PROCESS_INDEX", "FLOWLAYERS_PROCESS_COUNT"
COORDINATOR = "FLOWLAYERS_COORDINATOR"          # host:port of process 0's coordination service
ADDRESSES = "FLOWLAYERS_PROCESS_ADDRESSES"       # host:port per process, comma-separated, in process order
HOSTS = "FLOWLAYERS_HOSTS"                       # the job's hosts, comma-separated (the launcher's --hosts)
HEARTBEAT = "FLOWLAYERS_HEARTBEAT"               # a file where this process records its progress (env.heartbeat)
VERBOSE = "FLOWLAYERS_VERBOSE"                   # set: every process prints its progress (the launcher's --verbose)
RESTART_POINT = "FLOWLAYERS_RESTART_POINT"       # a file whose presence asks for a stop after the next backup
RESTART_CODE = 75                                # a process's exit code at that stop (EX_TEMPFAIL: "try again")
# env.heartbeat's record in that file, rewritten in place (a shared memory map): the stages begun (each program
# compiled, each step), the steps begun, 1 if the last stage was a step (0: a program compiled), and the stage count
# again, so that a record read while it was being written shows two counts
HEARTBEAT_RECORD = struct.Struct("<qqqq")


def read(environ=None):
    """``(index, count, coordinator, addresses, hosts)`` as the launcher described them in the environment, or None
    where it started no processes; damage is a ConfigError naming the variables."""
    environ = os.environ if environ is None else environ
    if COUNT not in environ:
        return None
    where = "the environment set by python -m flowlayers.launch"
    try:
        index, count = int(environ[INDEX]), int(environ[COUNT])
        addresses = tuple(a for a in environ.get(ADDRESSES, "").split(",") if a)
        coordinator = environ[COORDINATOR]
    except (KeyError, ValueError) as e:
        raise ConfigError(f"{where}: expected {INDEX}, {COUNT} (ints) and {COORDINATOR} (host:port), received "
                          f"{ {k: environ.get(k) for k in (INDEX, COUNT, COORDINATOR)} } ({e!r}); start the script "
                          f"with python -m flowlayers.launch, or unset {COUNT}") from None
    if count < 1 or not 0 <= index < count or len(addresses) != count:
        raise ConfigError(f"{where}: expected 0 <= {INDEX} < {COUNT} and one address per process in {ADDRESSES}, "
                          f"received index {index}, count {count}, {len(addresses)} address(es)")
    hosts = tuple(h for h in environ.get(HOSTS, "").split(",") if h) or ("127.0.0.1",)
    return index, count, coordinator, addresses, hosts


def from_environment(environ=None):
    """The Cluster the launcher described in the environment, or None where it started no processes (or one)."""
    got = read(environ)
    return Cluster(*got) if got is not None and got[1] > 1 else None
