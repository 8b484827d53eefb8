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
import ctypes
import math
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time

from .errors import ConfigError
from .framework import cluster
from .launch_guard import Guard
from .launch_watch import Watch

GRACE_SECONDS = 10      # --grace-period's default: how long stopped processes get before SIGKILL
POLL_SECONDS = 0.05     # how often the launcher looks at its processes


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
    last = 65535 - a.processes * len(hosts)     # the processes' ports follow the coordinator's
    if a.coordinator and not 1 <= int(a.coordinator.rsplit(":", 1)[1]) <= last:
        p.error(f"--coordinator: expected a port 1..{last} (the {a.processes * len(hosts)} processes listen on "
                f"the ports after it), received {a.coordinator!r}")
    for flag, value in (("--timeout", a.timeout), ("--grace-period", a.grace_period)):
        if not (math.isfinite(value) and value >= 0):
            p.error(f"{flag}: expected a finite number of seconds >= 0, received {value}")
    return a, hosts


def environments(a, hosts):
    """Each local process's environment additions."""
    count = a.processes * len(hosts)
    if len(hosts) == 1 and not a.coordinator:
        coordinator_port, *ports = free_ports(1 + a.processes)
        coordinator = f"{hosts[0]}:{coordinator_port}"
        addresses = [f"{hosts[0]}:{port}" for port in ports]
    else:
        coordinator = a.coordinator
        base = int(coordinator.rsplit(":", 1)[1])
        addresses = [f"{h}:{base + 1 + k * a.processes + i}" for k, h in enumerate(hosts) for i in range(a.processes)]
    envs = []
    for i in range(a.processes):
        index = a.host_index * a.processes + i
        env = {cluster.INDEX: str(index), cluster.COUNT: str(count), cluster.COORDINATOR: coordinator,
               cluster.ADDRESSES: ",".join(addresses), cluster.HOSTS: ",".join(hosts), "PYTHONUNBUFFERED": "1"}
        if a.devices_per_process:
            env["FLOWLAYERS_CPU_DEVICES"] = str(a.devices_per_process)
            if "CUDA_VISIBLE_DEVICES" not in os.environ:
                d = a.devices_per_process
                env["CUDA_VISIBLE_DEVICES"] = ",".join(str(i * d + k) for k in range(d))
        envs.append(env)
    return envs


def local_ports(a, envs):
    """``[(port, what it is for)]``: the ports this host's processes will listen on (the coordinator's where
    process 0 runs here, and each process's own)."""
    addresses = envs[0][cluster.ADDRESSES].split(",")
    ports = [(_port(envs[0][cluster.COORDINATOR]), "process 0's coordinator")] if a.host_index == 0 else []
    for env in envs:
        ports.append((_port(addresses[int(env[cluster.INDEX])]), f"process {env[cluster.INDEX]}'s server"))
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


def _ports_text(taken):
    return ", ".join(f"port {port} ({what}): {why}" for port, what, why in taken)


def _parent_death_signal(launcher):
    """What each child runs before the script: it is SIGKILLed when the launcher dies (Linux's parent-death
    signal; it reaches the child, not the child's children: the guard stops those), at once if it died already."""
    try:
        prctl = ctypes.CDLL("libc.so.6", use_errno=True).prctl      # loaded here, not after the fork
    except OSError:
        prctl = None

    def arm():
        if prctl is not None:
            prctl(1, signal.SIGKILL)        # PR_SET_PDEATHSIG
        if os.getppid() != launcher:
            os.kill(os.getpid(), signal.SIGKILL)
    return arm


def _ended(proc, guard):
    """Whether ``proc`` has exited.  Once it has, its group is SIGKILLed (children it left behind) while its exit is
    not yet collected, so that its id cannot name another group yet; then the exit is collected."""
    if proc.returncode is not None:
        return True
    if os.waitid(os.P_PID, proc.pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is None:
        return False
    _signal_group(proc.pid, signal.SIGKILL)
    guard.collected(proc.pid)
    proc.wait()
    return True


def _signal_group(pgid, signum):
    try:
        os.killpg(pgid, signum)
    except ProcessLookupError:
        pass


def _pump(stream, prefix, out, lock):
    for line in iter(stream.readline, b""):
        with lock:
            out.write(prefix + line)
            out.flush()
    stream.close()


def describe(code):
    if code < 0:
        try:
            return f"was killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"was killed by signal {-code}"
    return f"exited with code {code}"


def run(argv=None, out=None):
    """Launch, wait, and return the exit code: 0 when every process succeeded, else the first failure's code (1 for
    a process killed by a signal, or a hang), or 128 + N when the launcher received signal N (SIGINT, SIGTERM).
    Ports of ``--coordinator`` that this host's processes could not listen on: a ConfigError, before anything
    starts."""
    a, hosts = parse(sys.argv[1:] if argv is None else argv)
    envs = environments(a, hosts)
    check_ports(a, envs)
    folder = tempfile.mkdtemp(prefix="flowlayers-launch-")
    try:
        return _run(a, envs, out or sys.stdout.buffer, folder)
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def _run(a, envs, out, folder):
    names = [int(env[cluster.INDEX]) for env in envs]
    hearts = [os.path.join(folder, f"process-{n}") for n in names]
    guard, received = Guard(), []
    old = {s: signal.signal(s, lambda signum, _frame: received.append(signum)) for s in (signal.SIGINT,
                                                                                           signal.SIGTERM)}
    try:
        procs = _start(a, envs, hearts, guard)
        lock, pumps = threading.Lock(), []
        for p, n in zip(procs, names):
            pumps.append(threading.Thread(target=_pump, args=(p.stdout, f"[process {n}] ".encode(), out, lock),
                                          daemon=True))
            pumps[-1].start()
        watch = Watch(hearts, time.monotonic())
        kind, which = _wait(procs, watch, a.timeout, received, guard)
        msg, code = _outcome(kind, which, procs, names, watch, a)
        signum = which if kind == "signal" else signal.SIGTERM
        stopped, killed = _stop(procs, signum, a.grace_period, guard)
    finally:
        for s, handler in old.items():
            signal.signal(s, handler)
        guard.close()
    for t in pumps:
        t.join(timeout=5)
    if kind == "done":
        return 0
    msg += f"; stopped process(es) {[names[i] for i in stopped]}" if stopped else ""
    msg += (f"; process(es) {[names[i] for i in killed]} did not exit within --grace-period {a.grace_period:g} s "
            f"of {signal.Signals(signum).name} and were killed by SIGKILL") if killed else ""
    if kind != "signal" and not watch.seen[which].steps:      # it stopped before its first step: a port taken?
        taken = unbindable(local_ports(a, envs))
        msg += f"; in use on this host by another program: {_ports_text(taken)}" if taken else ""
    with lock:
        out.write(f"flowlayers.launch: {msg}\n".encode())
        out.flush()
    return code


def _start(a, envs, hearts, guard):
    """Start the script once per environment, each process in a group of its own, told to the guard."""
    procs, arm = [], _parent_death_signal(os.getpid())
    for env, heart in zip(envs, hearts):
        procs.append(subprocess.Popen([sys.executable, a.script, *a.args],
                                      env={**os.environ, **env, cluster.HEARTBEAT: heart}, stdout=subprocess.PIPE,
                                      stderr=subprocess.STDOUT, start_new_session=True, preexec_fn=arm))
        guard.started(procs[-1].pid)
    return procs


def _wait(procs, watch, timeout, received, guard):
    """Poll until the job ends: ``("done", None)``, ``("failed", i)``, ``("hung", i)`` or ``("signal", signum)``."""
    while True:
        if received:
            return "signal", received[0]
        running = [i for i, p in enumerate(procs) if not _ended(p, guard)]
        failed = next((i for i, p in enumerate(procs) if p.returncode not in (None, 0)), None)
        if failed is not None:
            return "failed", failed
        if not running:
            return "done", None
        now = time.monotonic()
        watch.look(now)
        hung = watch.stalled(running, now, timeout) if timeout else None
        if hung is not None:
            return "hung", hung
        time.sleep(POLL_SECONDS)


def _stop(procs, signum, grace, guard):
    """Send ``signum`` to the group of every process still running, wait up to ``grace`` seconds for them to exit,
    then SIGKILL the groups left.  Returns (the processes stopped, those SIGKILLed)."""
    stopped = [i for i, p in enumerate(procs) if not _ended(p, guard)]
    for i in stopped:
        _signal_group(procs[i].pid, signum)
    deadline = time.monotonic() + grace
    while time.monotonic() < deadline and not all(_ended(procs[i], guard) for i in stopped):
        time.sleep(POLL_SECONDS)
    killed = [i for i in stopped if not _ended(procs[i], guard)]
    for i in killed:
        _signal_group(procs[i].pid, signal.SIGKILL)
        procs[i].wait()
        guard.collected(procs[i].pid)
    return stopped, killed


def _outcome(kind, which, procs, names, watch, a):
    """The message naming what ended the job (before the others are stopped), and the launcher's exit code."""
    if kind == "done":
        return "", 0
    if kind == "signal":
        return f"received {signal.Signals(which).name}", 128 + which
    if kind == "hung":
        running = [i for i, p in enumerate(procs) if p.returncode is None]
        return (f"process {names[which]} made no progress for {a.timeout:g} s (--timeout): "
                f"{watch.report(which, running, names)}", 1)
    code = procs[which].returncode
    return f"process {names[which]} {describe(code)}", code if code > 0 else 1


def main():
    try:
        sys.exit(run())
    except ConfigError as e:
        sys.stderr.write(f"flowlayers.launch: error: {e}\n")
        sys.exit(2)


if __name__ == "__main__":
    main()
