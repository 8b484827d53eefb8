"""Start one script in several processes: ``python -m flowlayers.launch --processes N script.py [args]``.

In the manner of ``torchrun``: the launcher picks free loopback ports, starts ``N`` processes of the script with
its arguments unchanged, tells each where it stands through the environment (``framework/cluster.py``), prefixes
each line of their output with ``[process i]``, forwards SIGINT and SIGTERM, and exits non-zero naming the process
as soon as one fails (the others are stopped: none waits forever on a peer that is gone).  A job that makes no
progress for ``--timeout`` seconds is stopped too, naming the process the others wait on (``launch_watch.py``;
start-up and compiling count: a process is silent from its start until its first stage).

Each process runs in a process group of its own, which its children join: a stop reaches all of them.  Stopped
processes get SIGTERM (or the SIGINT the launcher received), then SIGKILL after ``--grace-period`` seconds; a
launcher that dies without stopping them (SIGKILL) leaves that to its guard (``launch_guard.py``).

Several hosts run the same command, each with its index::

    python -m flowlayers.launch --hosts 10.0.0.1,10.0.0.2 --host-index 0 --coordinator 10.0.0.1:29400 \\
        --processes 2 train.py
    python -m flowlayers.launch --hosts 10.0.0.1,10.0.0.2 --host-index 1 --coordinator 10.0.0.1:29400 \\
        --processes 2 train.py

Process ``h * N + i`` is process ``i`` of host ``h``; process 0 (on the first host) serves the coordinator port,
and process ``p`` listens on the coordinator port + 1 + ``p`` of its host (these ports must be free and reachable
between the hosts; distinct ports let two "hosts" share one machine, as the tests do).  The launcher checks that
this host's ports are free before it starts anything.
"""
import argparse
import functools
import math
import os
import shutil
import socket
import sys
import tempfile

from . import launch_elastic
from .errors import ConfigError
from .framework import cluster
from .launch_job import Host, attempt, member_environments, process_environments

GRACE_SECONDS = 10      # --grace-period's default: how long stopped processes get before SIGKILL


def free_ports(n, host="127.0.0.1"):
    """``n`` distinct ports free on ``host`` now (bound together, then released)."""
    socks = [socket.socket() for _ in range(n)]
    try:
        for s in socks:
            s.bind((host, 0))
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


def parse(argv):
    p = argparse.ArgumentParser(prog="python -m flowlayers.launch", description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--processes", type=int, default=1, help="processes on this host (default 1)")
    p.add_argument("--devices-per-process", type=int, default=None,
                   help="devices of each process: logical CPU devices on a CPU host; on a GPU host each process sees "
                        "its own D GPUs (CUDA_VISIBLE_DEVICES), unless that is set already")
    p.add_argument("--hosts", default=None, help="the job's hosts, comma-separated, the same list on every host")
    p.add_argument("--host-index", type=int, default=0, help="this host's position in --hosts")
    p.add_argument("--coordinator", default=None,
                   help="HOST:PORT of process 0's coordinator (required with several hosts; one host: a free port)")
    p.add_argument("--timeout", type=float, default=300.0,
                   help="seconds the job may go without progress (a process starting, a program compiled, a step) "
                        "before it is stopped, naming the process the others wait on (default 300; 0: never)")
    p.add_argument("--grace-period", type=float, default=GRACE_SECONDS,
                   help=f"seconds stopped processes get to exit after SIGTERM (or a forwarded SIGINT) before SIGKILL "
                        f"(default {GRACE_SECONDS})")
    p.add_argument("--max-restarts", type=int, default=0,
                   help="times the whole job is started again after a process fails or hangs (torchrun's meaning; "
                        "default 0): the others are stopped first; with BackupAndRestore it resumes where it was")
    p.add_argument("--elastic", default=None, metavar="MIN:MAX",
                   help="hosts the job runs on, at least MIN and at most MAX of --hosts: when a host's launcher is "
                        "gone the others start the job again without it, and a launcher that comes back is taken "
                        "in at the next restart point (the next backup); needs --coordinator")
    p.add_argument("--join-timeout", type=float, default=launch_elastic.JOIN_SECONDS,
                   help=f"--elastic: seconds the first start waits for every host, and any start waits for MIN "
                        f"(default {launch_elastic.JOIN_SECONDS:g})")
    p.add_argument("--verbose", "-v", action="store_true",
                   help="show every process's progress bar and the engines' own start-up lines (kept out by default)")
    p.add_argument("script", help="the Python script to run")
    p.add_argument("args", nargs=argparse.REMAINDER, help="its arguments, passed through unchanged")
    a = p.parse_args(argv)
    hosts = [h for h in (a.hosts or "127.0.0.1").split(",") if h]
    if a.processes < 1:
        p.error(f"--processes: expected at least 1, received {a.processes}")
    if a.devices_per_process is not None and a.devices_per_process < 1:
        p.error(f"--devices-per-process: expected at least 1, received {a.devices_per_process}")
    if not 0 <= a.host_index < len(hosts):
        p.error(f"--host-index: expected 0..{len(hosts) - 1} (one per host of --hosts {hosts}), received "
                f"{a.host_index}")
    if len(hosts) > 1 and not a.coordinator:
        p.error(f"--coordinator: expected HOST:PORT with several hosts ({hosts}), received none")
    if a.coordinator and (":" not in a.coordinator or not a.coordinator.rsplit(":", 1)[1].isdigit()):
        p.error(f"--coordinator: expected HOST:PORT, received {a.coordinator!r}")
    after = a.processes * len(hosts) + (1 if a.elastic else 0)     # the processes' ports (and the rendezvous')
    last = 65535 - after
    if a.coordinator and not 1 <= int(a.coordinator.rsplit(":", 1)[1]) <= last:
        p.error(f"--coordinator: expected a port 1..{last} (the {a.processes * len(hosts)} processes "
                f"{'and the rendezvous ' if a.elastic else ''}listen on the ports after it), received "
                f"{a.coordinator!r}")
    for flag, value in (("--timeout", a.timeout), ("--grace-period", a.grace_period),
                        ("--join-timeout", a.join_timeout)):
        if not (math.isfinite(value) and value >= 0):
            p.error(f"{flag}: expected a finite number of seconds >= 0, received {value}")
    if a.max_restarts < 0:
        p.error(f"--max-restarts: expected 0 or more, received {a.max_restarts}")
    a.elastic = _elastic(p, a, hosts) if a.elastic else None
    return a, hosts


def _elastic(p, a, hosts):
    """``--elastic MIN:MAX`` as (MIN, MAX), checked against ``--hosts``."""
    low, _, high = a.elastic.partition(":")
    if not (low.isdigit() and high.isdigit() and 1 <= int(low) <= int(high) <= len(hosts)):
        p.error(f"--elastic: expected MIN:MAX hosts with 1 <= MIN <= MAX <= {len(hosts)} (the hosts of --hosts), "
                f"received {a.elastic!r}")
    if not a.coordinator:
        p.error("--elastic: expected --coordinator HOST:PORT (the rendezvous of the hosts' launchers follows the "
                "processes' ports), received none")
    return int(low), int(high)


def environments(a, hosts):
    """Each local process's environment additions."""
    if len(hosts) == 1 and not a.coordinator:
        coordinator_port, *ports = free_ports(1 + a.processes)
        coordinator = f"{hosts[0]}:{coordinator_port}"
        addresses = [f"{hosts[0]}:{port}" for port in ports]
        return process_environments(a, 0, coordinator, addresses, hosts)
    return member_environments(a, hosts, list(range(len(hosts))))


def local_ports(a, envs):
    """``[(port, what it is for)]``: the ports this host's processes will listen on (the coordinator's where
    process 0 runs here, and each process's own; the launchers' rendezvous on the first host with --elastic)."""
    addresses = envs[0][cluster.ADDRESSES].split(",")
    ports = [(_port(envs[0][cluster.COORDINATOR]), "process 0's coordinator")] if a.host_index == 0 else []
    for env in envs:
        ports.append((_port(addresses[int(env[cluster.INDEX])]), f"process {env[cluster.INDEX]}'s server"))
    if a.elastic and a.host_index == 0:
        ports.append((launch_elastic.rendezvous_port(a, len(envs[0][cluster.HOSTS].split(","))),
                      "the launchers' rendezvous"))
    return ports


def _port(address):
    return int(address.rsplit(":", 1)[1])


def unbindable(ports):
    """``[(port, what, why)]`` of ``ports`` (``[(port, what)]``) that cannot be bound on this host now, as the
    engines' servers bind them (every interface, reusing a port only its closed connections hold)."""
    out = []
    for port, what in ports:
        with socket.socket() as s:
            s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            try:
                s.bind(("", port))
            except OSError as e:
                out.append((port, what, e.strerror))
    return out


def check_ports(a, envs):
    """Refuse, naming them, the ports of ``--coordinator`` this host's processes could not listen on."""
    if a.coordinator:
        taken = unbindable(local_ports(a, envs))
        if taken:
            raise ConfigError(f"--coordinator {a.coordinator}: expected ports this host's processes can listen on, "
                              f"received {_ports_text(taken)}; choose another --coordinator port, or stop the "
                              f"program that holds them")


def taken_text(a, envs):
    """What to add to a failure before the first step: this host's ports of the job another program holds."""
    taken = unbindable(local_ports(a, envs))
    return f"; in use on this host by another program: {_ports_text(taken)}" if taken else ""


def _ports_text(taken):
    return ", ".join(f"port {port} ({what}): {why}" for port, what, why in taken)


def run(argv=None, out=None):
    """Launch, wait, and return the exit code: 0 when every process succeeded, else the first failure's code (1 for
    a process killed by a signal, or a hang), or 128 + N when the launcher received signal N (SIGINT, SIGTERM).
    With ``--max-restarts N`` a failure (a process that failed or hung) stops the others and starts the whole job
    again, at most N times.  Ports of ``--coordinator`` that this host's processes could not listen on: a
    ConfigError, before anything starts."""
    a, hosts = parse(sys.argv[1:] if argv is None else argv)
    envs = environments(a, hosts)
    check_ports(a, envs)
    folder = tempfile.mkdtemp(prefix="flowlayers-launch-")
    try:
        with Host(out or sys.stdout.buffer) as host:
            if a.elastic:
                return launch_elastic.run(a, hosts, host, folder)
            return _run(a, hosts, envs, host, folder)
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def _run(a, hosts, envs, host, folder):
    """The job, started again after each failure while ``--max-restarts`` allows."""
    for number in range(a.max_restarts + 1):
        if number:
            envs = environments(a, hosts)       # one host: fresh free ports
        end = attempt(a, envs, host, os.path.join(folder, f"attempt-{number}"),
                      diagnose=functools.partial(taken_text, a, envs))
        if end.kind in ("done", "signal") or number == a.max_restarts or host.received:
            break
        host.say(f"{end.message}; restarting the job (restart {number + 1} of {a.max_restarts})")
    if end.kind != "done":
        host.say(end.message)
    return end.code


def main():
    try:
        sys.exit(run())
    except ConfigError as e:
        sys.stderr.write(f"flowlayers.launch: error: {e}\n")
        sys.exit(2)


if __name__ == "__main__":
    main()
