"""Start one script in several processes: ``python -m flowlayers.launch --processes N script.py [args]``.

In the manner of ``torchrun``: the launcher picks free loopback ports, starts ``N`` processes of the script with
its arguments unchanged, tells each where it stands through the environment (``framework/cluster.py``), prefixes
each line of their output with ``[process i]``, forwards SIGINT and SIGTERM, and exits non-zero naming the process
as soon as one fails (the others are stopped: none waits forever on a peer that is gone).  A job whose processes
stop making progress (no step for ``--timeout`` seconds, once steps began) is stopped too, naming the process silent
longest: a hung process leaves its peers waiting in a collective.

Several hosts run the same command, each with its index::

    python -m flowlayers.launch --hosts 10.0.0.1,10.0.0.2 --host-index 0 --coordinator 10.0.0.1:29400 \\
        --processes 2 train.py
    python -m flowlayers.launch --hosts 10.0.0.1,10.0.0.2 --host-index 1 --coordinator 10.0.0.1:29400 \\
        --processes 2 train.py

Process ``h * N + i`` is process ``i`` of host ``h``; process 0 (on the first host) serves the coordinator port,
and process ``p`` listens on the coordinator port + 1 + ``p`` of its host (these ports must be free and reachable
between the hosts; distinct ports let two "hosts" share one machine, as the tests do).
"""
import argparse
import ctypes
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time

from .framework import cluster

GRACE_SECONDS = 10      # how long stopped processes get before SIGKILL


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
                   help="seconds a process may go without a step, once its steps began, before the job is stopped "
                        "(default 300; 0: never)")
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


def _die_with_parent():
    """In the child: receive SIGKILL when the launcher dies, so that no process outlives its job (Linux)."""
    try:
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGKILL)   # PR_SET_PDEATHSIG
    except OSError:
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
    """Launch, wait, and return the exit code: 0 when every process succeeded, else the first failure's code
    (1 for a signal or a hang)."""
    a, hosts = parse(sys.argv[1:] if argv is None else argv)
    beats = tempfile.mkdtemp(prefix="flowlayers-launch-")
    try:
        return _run(a, hosts, out or sys.stdout.buffer, beats)
    finally:
        shutil.rmtree(beats, ignore_errors=True)


def _run(a, hosts, out, beats):
    lock, first = threading.Lock(), a.host_index * a.processes     # first: this host's first process index
    procs, pumps = [], []
    hearts = [os.path.join(beats, f"process-{first + i}") for i in range(a.processes)]
    for i, extra in enumerate(environments(a, hosts)):
        extra[cluster.HEARTBEAT] = hearts[i]
        proc = subprocess.Popen([sys.executable, a.script, *a.args], env={**os.environ, **extra},
                                stdout=subprocess.PIPE, stderr=subprocess.STDOUT, preexec_fn=_die_with_parent)
        procs.append(proc)
        pumps.append(threading.Thread(target=_pump, args=(proc.stdout, f"[process {first + i}] ".encode(), out, lock),
                                      daemon=True))
        pumps[-1].start()

    def forward(signum, _frame):
        for proc in procs:
            if proc.poll() is None:
                proc.send_signal(signum)

    old = {s: signal.signal(s, forward) for s in (signal.SIGINT, signal.SIGTERM)}
    failed = hung = None
    try:
        while failed is None and any(proc.poll() is None for proc in procs):
            failed = next((i for i, proc in enumerate(procs) if proc.poll() not in (None, 0)), None)
            if failed is None and a.timeout:
                failed = hung = _silent(procs, hearts, a.timeout)
            time.sleep(0.05)
        failed = failed if failed is not None else next((i for i, p in enumerate(procs) if p.returncode), None)
        if failed is not None:
            _stop(procs)
    finally:
        for s, handler in old.items():
            signal.signal(s, handler)
    for t in pumps:
        t.join(timeout=5)
    if failed is None:
        return 0
    code = 1 if hung is not None else procs[failed].returncode
    what = f"made no progress for {a.timeout:g} s (no step; --timeout)" if hung is not None else describe(code)
    with lock:
        stopped = [first + i for i, p in enumerate(procs) if i != failed and p.returncode not in (0,)]
        msg = (f"flowlayers.launch: process {first + failed} {what}"
               + (f"; stopped process(es) {stopped}" if stopped else "") + "\n")
        out.write(msg.encode())
        out.flush()
    return code if code > 0 else 1


def _silent(procs, hearts, timeout):
    """The running process silent longest, if it has been silent for over ``timeout`` seconds since its last
    step; None otherwise (a process before its first step is not judged: it may be compiling)."""
    now, ages = time.time(), {}
    for i, (proc, heart) in enumerate(zip(procs, hearts)):
        if proc.poll() is None and os.path.exists(heart):
            ages[i] = now - os.path.getmtime(heart)
    oldest = max(ages, key=ages.get, default=None)
    return oldest if oldest is not None and ages[oldest] > timeout else None


def _stop(procs):
    """SIGTERM the processes still running, then SIGKILL those left after ``GRACE_SECONDS``."""
    for proc in procs:
        if proc.poll() is None:
            proc.terminate()
    deadline = time.time() + GRACE_SECONDS
    for proc in procs:
        try:
            proc.wait(timeout=max(0.1, deadline - time.time()))
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def main():
    sys.exit(run())


if __name__ == "__main__":
    main()
