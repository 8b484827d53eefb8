"""One start of a launched job on this host: its processes started, their output pumped, watched until the job
ends, and what is left stopped (``launch.py`` starts it once, again after a failure, or as the job's membership
changes: ``launch_elastic.py``).

Each process runs in a process group of its own, which its children join: a stop reaches all of them.  Stopped
processes get SIGTERM (or the SIGINT the launcher received), then SIGKILL after ``--grace-period`` seconds; a
launcher that dies without stopping them (SIGKILL) leaves that to its guard (``launch_guard.py``).
"""
import ctypes
import os
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass

from . import launch_logs
from .framework import cluster
from .launch_guard import Guard
from .launch_watch import Watch

POLL_SECONDS = 0.05     # how often the launcher looks at its processes


class Host:
    """What the launcher holds for its whole life: the output, the guard, and the signals it received."""

    def __init__(self, out):
        self.out, self.lock, self.received = out, threading.Lock(), []

    def __enter__(self):
        self.guard = Guard()
        self._old = {s: signal.signal(s, lambda signum, _frame: self.received.append(signum))
                     for s in (signal.SIGINT, signal.SIGTERM)}
        return self

    def __exit__(self, *exc):
        for s, handler in self._old.items():
            signal.signal(s, handler)
        self.guard.close()

    def say(self, message):
        with self.lock:
            self.out.write(f"flowlayers.launch: {message}\n".encode())
            self.out.flush()


def member_environments(a, hosts, members):
    """This host's processes' environment additions in a job over the hosts ``members`` (indices into ``hosts``,
    this one among them): host ``members[r]``'s processes are ``r * N ..``; process ``i`` of host ``h`` serves
    on the ``1 + h * N + i``-th port after the coordinator's whoever the members are, so that a port is never
    another host's."""
    n, base = a.processes, int(a.coordinator.rsplit(":", 1)[1])
    coordinator = f"{hosts[members[0]]}:{base}"
    addresses = [f"{hosts[h]}:{base + 1 + h * n + i}" for h in members for i in range(n)]
    return process_environments(a, members.index(a.host_index) * n, coordinator, addresses,
                                [hosts[h] for h in members])


def process_environments(a, first, coordinator, addresses, hosts):
    """Each of this host's ``a.processes`` processes' environment: process ``first + i`` of ``len(addresses)``."""
    envs = []
    for i in range(a.processes):
        env = {cluster.INDEX: str(first + i), cluster.COUNT: str(len(addresses)), cluster.COORDINATOR: coordinator,
               cluster.ADDRESSES: ",".join(addresses), cluster.HOSTS: ",".join(hosts), "PYTHONUNBUFFERED": "1"}
        if a.devices_per_process:
            env["FLOWLAYERS_CPU_DEVICES"] = str(a.devices_per_process)
            if "CUDA_VISIBLE_DEVICES" not in os.environ:
                d = a.devices_per_process
                env["CUDA_VISIBLE_DEVICES"] = ",".join(str(i * d + k) for k in range(d))
        envs.append(env)
    return envs


@dataclass
class Ended:
    """How one start of the job on this host ended: ``kind`` ("done", "failed", "hung", "signal", "planned": its
    processes stopped at a restart point, "outside": stopped for a reason from outside), in words, and the exit
    code it gives the launcher."""
    kind: str
    message: str
    code: int
    steps: int = 0          # the most steps a process of this host began


def attempt(a, envs, host, folder, outside=None, restart_point=None, diagnose=None):
    """Start the script once per environment, wait until the job ends, stop what is left, and say how it ended.
    ``outside()``: polled, a reason to stop the job or None; ``restart_point``: the file whose presence asks the
    processes to stop after their next backup (``flow.env.restart_point``); ``diagnose()``: what to add where a
    process failed before its first step (ports another program holds)."""
    os.makedirs(folder, exist_ok=True)
    names = [int(env[cluster.INDEX]) for env in envs]
    hearts = [os.path.join(folder, f"process-{n}") for n in names]
    extra = {cluster.RESTART_POINT: restart_point} if restart_point else {}
    procs = _start(a, [{**env, **extra} for env in envs], hearts, host.guard)
    pumps = [threading.Thread(target=launch_logs.pump, args=(p.stdout, f"[process {n}] ".encode(), host.out,
                                                             host.lock, a.verbose), daemon=True)
             for p, n in zip(procs, names)]
    for t in pumps:
        t.start()
    watch = Watch(hearts, time.monotonic())
    kind, which = _wait(procs, watch, a.timeout, host.received, host.guard, outside, restart_point)
    msg, code = _outcome(kind, which, procs, names, watch, a)
    signum = which if kind == "signal" else signal.SIGTERM
    stopped, killed = _stop(procs, signum, a.grace_period, host.guard)
    for t in pumps:
        t.join(timeout=5)
    msg += f"; stopped process(es) {[names[i] for i in stopped]}" if stopped else ""
    msg += (f"; process(es) {[names[i] for i in killed]} did not exit within --grace-period {a.grace_period:g} s "
            f"of {signal.Signals(signum).name} and were killed by SIGKILL") if killed else ""
    if kind in ("failed", "hung") and not watch.seen[which].steps and diagnose:     # before its first step
        msg += diagnose()
    return Ended(kind, msg, code, max(p.steps for p in watch.seen))


def _start(a, envs, hearts, guard):
    """Start the script once per environment, each process in a group of its own, told to the guard."""
    procs, arm = [], _parent_death_signal(os.getpid())
    verbose = {cluster.VERBOSE: "1"} if a.verbose else {}
    for env, heart in zip(envs, hearts):
        procs.append(subprocess.Popen([sys.executable, a.script, *a.args],
                                      env={**os.environ, **env, **verbose, cluster.HEARTBEAT: heart},
                                      stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True,
                                      preexec_fn=arm))
        guard.started(procs[-1].pid)
    return procs


def _wait(procs, watch, timeout, received, guard, outside=None, restart_point=None):
    """Poll until the job ends: ``("done", None)``, ``("failed", i)``, ``("hung", i)``, ``("signal", signum)``,
    ``("planned", i)`` (process i stopped at the restart point asked for) or ``("outside", reason)``."""
    while True:
        if received:
            return "signal", received[0]
        reason = outside() if outside else None
        if reason:
            return "outside", reason
        running = [i for i, p in enumerate(procs) if not ended(p, guard)]
        failed = next((i for i, p in enumerate(procs) if p.returncode not in (None, 0)), None)
        if failed is not None:
            planned = restart_point and procs[failed].returncode == cluster.RESTART_CODE and \
                os.path.exists(restart_point)
            return ("planned" if planned else "failed"), failed
        if not running:
            return "done", None
        now = time.monotonic()
        watch.look(now)
        hung = watch.stalled(running, now, timeout) if timeout else None
        if hung is not None:
            return "hung", hung
        time.sleep(POLL_SECONDS)


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


def ended(proc, guard):
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


def describe(code):
    if code < 0:
        try:
            return f"was killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"was killed by signal {-code}"
    return f"exited with code {code}"


def _stop(procs, signum, grace, guard):
    """Send ``signum`` to the group of every process still running, wait up to ``grace`` seconds for them to exit,
    then SIGKILL the groups left.  Returns (the processes stopped, those SIGKILLed)."""
    stopped = [i for i, p in enumerate(procs) if not ended(p, guard)]
    for i in stopped:
        _signal_group(procs[i].pid, signum)
    deadline = time.monotonic() + grace
    while time.monotonic() < deadline and not all(ended(procs[i], guard) for i in stopped):
        time.sleep(POLL_SECONDS)
    killed = [i for i in stopped if not ended(procs[i], guard)]
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
    if kind == "outside":
        return which, 1
    if kind == "planned":
        return f"process {names[which]} stopped at the restart point asked for", 0
    if kind == "hung":
        running = [i for i, p in enumerate(procs) if p.returncode is None]
        return (f"process {names[which]} made no progress for {a.timeout:g} s (--timeout): "
                f"{watch.report(which, running, names)}", 1)
    code = procs[which].returncode
    return f"process {names[which]} {describe(code)}", code if code > 0 else 1
