"""Which system started this process, read into one ``contract.Cluster`` before any engine starts.

Systems are looked for in this order, and the first present describes the job: ``python -m flowlayers.launch``
(``cluster.py``); SLURM (``srun``); Open MPI (``mpirun``); a Kubernetes Indexed Job or JobSet; ``TF_CONFIG``.
None present: one process.  The front end imports no engine, so each system's variables are read here in pure
Python, the same variables the engines' own resolvers read (cited by each reader): JAX's cluster detection
(``jax/_src/clusters/{slurm,ompi,k8s}_cluster.py``) and TensorFlow's ``SlurmClusterResolver`` and
``TFConfigClusterResolver`` (``tensorflow/python/distribute/cluster_resolver/``).  Every system after the first
that is present too must describe the same job (process count and index): a job started by one system with
another's variables left over (2 SLURM tasks, a ``TF_CONFIG`` of 3 workers) is refused by name, since its
processes would wait for peers that never come.

A Cluster holds two kinds of meeting point: ``coordinator`` (``jax.distributed``'s service, on process 0's host)
and ``addresses`` (a gRPC server per process: TensorFlow's DTensor and MultiWorkerMirroredStrategy).  Where a
system names no ports, they are derived as JAX derives its coordinator's (from the job's id) and the process
servers listen on the ports after it (``port_after``).  ``addresses`` is empty where the system does not say on
which host each process runs (Open MPI over several nodes): the tensorflow backend refuses that by name.
"""
import json
import os
import re
from dataclasses import dataclass
from typing import Tuple

from ..contract import Cluster
from ..errors import ConfigError
from . import cluster as launcher

LAUNCHER = "python -m flowlayers.launch"
COORDINATOR_ADDRESS = "JAX_COORDINATOR_ADDRESS"     # JAX's own override of the coordinator (jax.distributed)
COORDINATOR_PORT = "JAX_COORDINATOR_PORT"           # JAX's own override of a detected coordinator's port
HOSTS = launcher.HOSTS                              # a Kubernetes job's pods, host names in index order
KUBERNETES_PORT = 55527                             # JAX's K8sCluster._coordinator_port
TOP_PORTS = 4096                                    # JAX picks a derived port among the top 4096


@dataclass(frozen=True)
class Detected:
    """What one system says about this process's job."""
    system: str                     # who started it, in words
    index: int
    count: int
    coordinator: str
    addresses: Tuple[str, ...]      # () where the system does not say where every process runs
    hosts: Tuple[str, ...]
    detail: str = ""                # the variables read, for messages

    def cluster(self):
        """The contract's Cluster (None for one process)."""
        return Cluster(self.index, self.count, self.coordinator, self.addresses, self.hosts) if self.count > 1 \
            else None

    def describe(self):
        """One line: what was detected."""
        return (f"{self.system} ({self.detail}): process {self.index} of {self.count}"
                + (f", coordinator {self.coordinator}" if self.count > 1 else ""))


def port_after(port, k):
    """The ``k``-th port after ``port``, counted on from 65535 round to the top 4096 ports (those JAX derives)."""
    p = port + k
    return p if p <= 65535 else p - TOP_PORTS


def derived_port(number):
    """A port among the top 4096 from a job's ``number``, as JAX derives its coordinator's."""
    return number % TOP_PORTS + (65536 - TOP_PORTS)


def _int(environ, name, system, low=0):
    value = environ.get(name)
    try:
        number = int(value)
    except (TypeError, ValueError):
        raise ConfigError(f"{system}: expected {name} to be an integer >= {low}, received {value!r}") from None
    if number < low:
        raise ConfigError(f"{system}: expected {name} to be an integer >= {low}, received {value!r}")
    return number


def check_address(text, what):
    """``text`` if it is ``host:port``, else a ConfigError naming ``what``."""
    host, _, port = str(text).rpartition(":")
    if not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise ConfigError(f"{what}: expected HOST:PORT (a port 1..65535), received {text!r}")
    return text


def _coordinator(environ, coordinator, host, port, system):
    """The coordinator: ``coordinator`` given (flow.env.init), else ``$JAX_COORDINATOR_ADDRESS``, else ``host``
    at ``$JAX_COORDINATOR_PORT`` or ``port``; with its port, the base of the process servers' ports."""
    chosen = coordinator or environ.get(COORDINATOR_ADDRESS)
    if chosen:
        where = "flow.env.init(coordinator_address=...)" if coordinator else f"${COORDINATOR_ADDRESS}"
        check_address(chosen, f"{system}: {where}")
        return chosen, int(chosen.rpartition(":")[2])
    if environ.get(COORDINATOR_PORT):
        port = _int(environ, COORDINATOR_PORT, system, low=1)
        check_address(f"{host}:{port}", f"{system}: ${COORDINATOR_PORT}")
    return f"{host}:{port}", port


def _check_index(system, index, count, detail):
    if count < 1 or not 0 <= index < count:
        raise ConfigError(f"{system}: expected a process index 0..{count - 1} of {count} process(es), received "
                          f"index {index} ({detail})")


# --- our launcher --------------------------------------------------------------------------------------------

def from_launcher(environ, coordinator=None):
    """The launcher's environment (``framework/cluster.py``), or None without it."""
    got = launcher.read(environ)
    if got is None:
        return None
    index, count, where, addresses, hosts = got
    return Detected(LAUNCHER, index, count, coordinator or where, addresses, hosts,
                    f"{launcher.INDEX}={index}, {launcher.COUNT}={count}")


# --- SLURM -----------------------------------------------------------------------------------------------------

SLURM_PRESENT = ("SLURM_JOB_ID", "SLURM_STEP_NODELIST", "SLURM_NTASKS", "SLURM_PROCID", "SLURM_LOCALID")


def hostlist(text):
    """SLURM's compact host list expanded, in order: ``"node[1-3,5],gpu07"`` -> node1 node2 node3 node5 gpu07
    (zero padding kept: ``n[01-02]`` -> n01 n02).  Malformed: a ConfigError."""
    parts, depth, start = [], 0, 0
    for i, ch in enumerate(text + ","):
        if ch == "[":
            depth += 1
        elif ch == "]":
            depth -= 1
        if depth not in (0, 1):
            break
        if ch == "," and depth == 0:
            parts.append(text[start:i])
            start = i + 1
    else:
        if depth == 0 and all(parts):
            return [host for part in parts for host in _expand(part, text)]
    raise ConfigError(f"SLURM: expected SLURM_STEP_NODELIST as a host list like 'node[1-3,5],gpu7', received "
                      f"{text!r}")


def _expand(part, text):
    """One host expression: ``prefix[ranges]suffix`` (one bracket at most here) or a plain name."""
    m = re.fullmatch(r"([^\[\]]*)(?:\[([0-9,\-]+)\]([^\[\]]*))?", part)
    if m is None:
        raise ConfigError(f"SLURM: expected SLURM_STEP_NODELIST as a host list like 'node[1-3,5],gpu7', received "
                          f"{text!r} (part {part!r})")
    prefix, ranges, suffix = m.groups()
    if ranges is None:
        return [prefix]
    hosts = []
    for r in ranges.split(","):
        low, _, high = r.partition("-")
        if not low.isdigit() or (high and not high.isdigit()) or (high and int(high) < int(low)):
            raise ConfigError(f"SLURM: expected ranges like 1-3 in SLURM_STEP_NODELIST, received {r!r} in {text!r}")
        width = len(low)
        hosts += [f"{prefix}{n:0{width}d}{suffix}" for n in range(int(low), int(high or low) + 1)]
    return hosts


def tasks_per_node(text):
    """SLURM's tasks per node expanded: ``"2(x3),1"`` -> [2, 2, 2, 1]."""
    out = []
    for part in text.split(","):
        m = re.fullmatch(r"(\d+)(?:\(x(\d+)\))?", part.strip())
        if m is None:
            raise ConfigError(f"SLURM: expected SLURM_STEP_TASKS_PER_NODE like '2(x3),1', received {text!r}")
        out += [int(m.group(1))] * int(m.group(2) or 1)
    return out


def from_slurm(environ, coordinator=None):
    """An ``srun`` step's tasks.  Present when JAX's ``SlurmCluster`` finds its variables (``SLURM_JOB_ID``,
    ``SLURM_STEP_NODELIST``, ``SLURM_NTASKS``, ``SLURM_PROCID``, ``SLURM_LOCALID``).  The step's tasks are
    ``SLURM_STEP_NUM_TASKS`` (TensorFlow's ``SlurmClusterResolver``; ``SLURM_NTASKS`` without it, JAX's), laid out
    over the nodes of ``SLURM_STEP_NODELIST`` block by block as ``SLURM_STEP_TASKS_PER_NODE`` says (TensorFlow's
    resolver does the same).  The coordinator is the first node, at JAX's port ``61440 + SLURM_JOB_ID % 4096``;
    task ``l`` of a node serves on the ``1 + l``-th port after it."""
    if not all(name in environ for name in SLURM_PRESENT):
        return None
    system = "SLURM"
    job = _int(environ, "SLURM_JOB_ID", system)
    count_name = "SLURM_STEP_NUM_TASKS" if "SLURM_STEP_NUM_TASKS" in environ else "SLURM_NTASKS"
    count = _int(environ, count_name, system, low=1)
    index, local = _int(environ, "SLURM_PROCID", system), _int(environ, "SLURM_LOCALID", system)
    detail = f"job {job}, {count_name}={count}, SLURM_PROCID={index}"
    _check_index(system, index, count, detail)
    nodes = hostlist(environ["SLURM_STEP_NODELIST"])
    per_name = next((n for n in ("SLURM_STEP_TASKS_PER_NODE", "SLURM_TASKS_PER_NODE") if n in environ), None)
    if per_name:
        per_node = tasks_per_node(environ[per_name])
    elif count % len(nodes) == 0:
        per_node = [count // len(nodes)] * len(nodes)
    else:
        raise ConfigError(f"SLURM: expected SLURM_STEP_TASKS_PER_NODE where {count} tasks do not divide evenly over "
                          f"the {len(nodes)} nodes of SLURM_STEP_NODELIST, received none")
    if len(per_node) != len(nodes) or sum(per_node) != count:
        raise ConfigError(f"SLURM: expected {per_name} to give the tasks of each of the {len(nodes)} nodes "
                          f"{nodes}, {count} in all ({count_name}), received {environ[per_name]!r}")
    where, base = _coordinator(environ, coordinator, nodes[0], derived_port(job), system)
    places = [(node, l) for node, n in zip(nodes, per_node) for l in range(n)]
    node = _int(environ, "SLURM_NODEID", system) if "SLURM_NODEID" in environ else None
    if places[index][1] != local or (node is not None and places[index][0] != nodes[min(node, len(nodes) - 1)]):
        raise ConfigError(f"SLURM: expected task {index} to be task {places[index][1]} of node "
                          f"{places[index][0]!r} (tasks laid out node by node, srun's block distribution), "
                          f"received SLURM_LOCALID={local}" + (f", SLURM_NODEID={node}" if node is not None else "")
                          + "; start the step with srun --distribution=block")
    addresses = tuple(f"{h}:{port_after(base, 1 + l)}" for h, l in places)
    return Detected(system, index, count, where, addresses, tuple(nodes), detail)


# --- Open MPI --------------------------------------------------------------------------------------------------

def from_openmpi(environ, coordinator=None):
    """An ``mpirun`` job's ranks: ``OMPI_COMM_WORLD_SIZE``, ``_RANK``, ``_LOCAL_RANK``, ``_LOCAL_SIZE``.  The
    coordinator is where JAX's ``OmpiCluster`` puts it: the IP of mpirun's own daemon in
    ``OMPI_MCA_orte_hnp_uri`` (Open MPI 4; Open MPI 5 has no such variable: pass the address to
    ``flow.env.init``), at the port ``61440 + (job id // 4096) % 4096`` from the uri's job id.  On one node every
    rank serves on the ``1 + rank``-th port after it; over several nodes mpirun does not say which node holds which
    rank, and ``addresses`` stays empty."""
    if "OMPI_COMM_WORLD_SIZE" not in environ:
        return None
    system = "Open MPI"
    count = _int(environ, "OMPI_COMM_WORLD_SIZE", system, low=1)
    index = _int(environ, "OMPI_COMM_WORLD_RANK", system)
    detail = f"OMPI_COMM_WORLD_SIZE={count}, OMPI_COMM_WORLD_RANK={index}"
    _check_index(system, index, count, detail)
    uri = environ.get("OMPI_MCA_orte_hnp_uri", "")
    job, ip = re.match(r"(\d+)\.", uri), re.search(r"tcp://(.+?)[,:]|tcp6://\[(.+?)[,\]]", uri)
    if (job is None or ip is None) and not (coordinator or environ.get(COORDINATOR_ADDRESS)):
        raise ConfigError(f"{system}: expected OMPI_MCA_orte_hnp_uri (mpirun's address, Open MPI 4) to find the "
                          f"coordinator, received {uri or 'none'!r}; pass it: flow.env.init(coordinator_address="
                          f"'HOST:PORT') or ${COORDINATOR_ADDRESS}")
    host = (ip.group(1) or f"[{ip.group(2)}]") if ip else ""
    port = derived_port(int(job.group(1)) // TOP_PORTS) if job else 0
    where, base = _coordinator(environ, coordinator, host, port, system)
    local_size = _int(environ, "OMPI_COMM_WORLD_LOCAL_SIZE", system, low=1) \
        if "OMPI_COMM_WORLD_LOCAL_SIZE" in environ else count
    one_node = local_size == count
    node_host = where.rpartition(":")[0]
    addresses = tuple(f"{node_host}:{port_after(base, 1 + r)}" for r in range(count)) if one_node else ()
    return Detected(system, index, count, where, addresses, (node_host,) if one_node else (), detail)


# --- Kubernetes ------------------------------------------------------------------------------------------------

def from_kubernetes(environ, coordinator=None):
    """A Kubernetes Indexed Job (or a JobSet of one Job per replicated job), one process per pod.  Kubernetes sets
    ``JOB_COMPLETION_INDEX`` in each pod (the index JAX's ``K8sCluster`` reads); the pods' host names, which JAX
    asks the Kubernetes API for, are given in ``$FLOWLAYERS_HOSTS`` in index order (``train-0.train,
    train-1.train``: the Job's name, the index, the headless Service's name), so that no API access is needed.
    The coordinator is pod 0 at JAX's port 55527; pod ``i`` serves on the ``1 + i``-th port after it."""
    if "JOB_COMPLETION_INDEX" not in environ:
        return None
    system = "Kubernetes"
    index = _int(environ, "JOB_COMPLETION_INDEX", system)
    hosts = tuple(h for h in environ.get(HOSTS, "").split(",") if h)
    if not hosts:
        raise ConfigError(f"{system} (JOB_COMPLETION_INDEX={index}): expected ${HOSTS}, the pods' host names in "
                          f"index order ('JOB-0.SERVICE,JOB-1.SERVICE,...'), received none; set it in the Job's "
                          f"container env (docs/howto/processes.md)")
    detail = f"JOB_COMPLETION_INDEX={index}, {len(hosts)} pods in ${HOSTS}"
    _check_index(system, index, len(hosts), detail)
    where, base = _coordinator(environ, coordinator, hosts[0], KUBERNETES_PORT, system)
    addresses = tuple(f"{h}:{port_after(base, 1 + i)}" for i, h in enumerate(hosts))
    return Detected(system, index, len(hosts), where, addresses, hosts, detail)


# --- TF_CONFIG -------------------------------------------------------------------------------------------------

def from_tf_config(environ, coordinator=None):
    """``TF_CONFIG``'s cluster, as TensorFlow's ``TFConfigClusterResolver`` reads it: ``{"cluster": {"chief":
    [...], "worker": [...]}, "task": {"type": ..., "index": ...}}``; processes are the chief (if any), then the
    workers.  Each address is that process's server; the coordinator (JAX) is process 0's address (one engine
    runs per process).  Parameter servers and evaluators are not processes of one program: refused by name."""
    text = environ.get("TF_CONFIG")
    if not text:
        return None
    system = "TF_CONFIG"
    try:
        config = json.loads(text)
    except ValueError as e:
        raise ConfigError(f"{system}: expected JSON, received {text[:200]!r} ({e})") from None
    spec = config.get("cluster") if isinstance(config, dict) else None
    if not spec:
        return None     # TensorFlow reads no cluster from it either
    if not isinstance(spec, dict) or set(spec) - {"chief", "worker"} or \
            not all(isinstance(v, list) and all(isinstance(a, str) for a in v) for v in spec.values()):
        raise ConfigError(f"{system}: expected a cluster of 'chief' and 'worker' tasks, lists of 'host:port', "
                          f"received {spec!r}; one program runs in every process (no 'ps' or 'evaluator')")
    chief, workers = list(spec.get("chief", [])), list(spec.get("worker", []))
    addresses = tuple(check_address(a, f"{system}: a task's address") for a in chief + workers)
    task = config.get("task") or {}
    kind, position = task.get("type"), task.get("index", 0)
    if kind not in ("chief", "worker") or isinstance(position, bool) or not isinstance(position, int):
        raise ConfigError(f"{system}: expected a task of type 'chief' or 'worker' with an integer index, received "
                          f"{task!r}")
    index = position if kind == "chief" else len(chief) + position
    detail = f"{len(chief)} chief, {len(workers)} worker(s), task {kind} {position}"
    group = chief if kind == "chief" else workers
    if not 0 <= position < len(group):
        raise ConfigError(f"{system}: expected a task index 0..{len(group) - 1} of the {len(group)} {kind} "
                          f"task(s), received {position}")
    where = coordinator or environ.get(COORDINATOR_ADDRESS) or addresses[0]
    check_address(where, f"{system}: the coordinator")
    hosts = tuple(dict.fromkeys(a.rpartition(":")[0] for a in addresses))
    return Detected(system, index, len(addresses), where, addresses, hosts, detail)


READERS = (from_launcher, from_slurm, from_openmpi, from_kubernetes, from_tf_config)


def detect(environ=None, coordinator=None):
    """The first system present, its description checked against every other present (the launcher's is taken
    alone: it may run inside another system's allocation); None where none is.  ``coordinator``: an address given
    by ``flow.env.init``."""
    environ = os.environ if environ is None else environ
    found = from_launcher(environ, coordinator)
    if found is not None:
        return found
    present = [d for d in (read(environ, coordinator) for read in READERS[1:]) if d is not None]
    for other in present[1:]:
        if (other.count, other.index) != (present[0].count, present[0].index):
            first = present[0]
            raise ConfigError(f"{first.system} and {other.system} describe different jobs: expected the same "
                              f"process count and index from both, received {first.count} process(es), this one "
                              f"{first.index} ({first.detail}) and {other.count}, this one {other.index} "
                              f"({other.detail}); unset the variables of the system that did not start this job")
    return present[0] if present else None


def given(detected, count, index, coordinator, what):
    """``detected`` (None: no system) with what ``flow.env.init`` (``what``) gave.  A value given must agree with a
    detected system's (the coordinator was already taken by ``detect``).  With no system, several processes need
    the count, index and coordinator, and are taken to share the coordinator's host (their servers on the ports
    after it); one process needs none of them."""
    if detected is not None:
        for name, value, have in (("process_count", count, detected.count),
                                  ("process_index", index, detected.index)):
            if value is not None and value != have:
                raise ConfigError(f"{what}: expected {name}={have}, as {detected.system} started this process "
                                  f"({detected.detail}), received {name}={value}; drop the argument, or unset the "
                                  f"variables of {detected.system}")
        return detected
    if count is None and index is None and coordinator is None:
        return None
    if count is None:
        raise ConfigError(f"{what}: expected process_count with process_index or coordinator_address (no launcher, "
                          f"SLURM, Open MPI, Kubernetes or TF_CONFIG found to tell it), received none")
    if count == 1:
        if index not in (None, 0) or coordinator is not None:
            raise ConfigError(f"{what}: expected no coordinator_address and process_index 0 (or none) for "
                              f"process_count=1, received process_index={index}, coordinator_address={coordinator!r}")
        return None
    missing = [n for n, v in (("coordinator_address", coordinator), ("process_index", index)) if v is None]
    if missing:
        raise ConfigError(f"{what}: expected {' and '.join(missing)} with process_count={count} (no launcher, "
                          f"SLURM, Open MPI, Kubernetes or TF_CONFIG found to tell), received none")
    _check_index("flow.env.init", index, count, f"process_count={count}")
    host, base = coordinator.rpartition(":")[0], int(coordinator.rpartition(":")[2])
    addresses = tuple(f"{host}:{port_after(base, 1 + p)}" for p in range(count))
    return Detected("flow.env.init", index, count, coordinator, addresses, (host,),
                    f"process_count={count}, process_index={index}")


def describe_nothing():
    return "one process (no launcher, SLURM, Open MPI, Kubernetes or TF_CONFIG found)"
