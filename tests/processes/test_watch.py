"""The launcher's watch, end to end: a hung process named (on the backend under test, ``$FLOWLAYERS_BACKEND``),
stopped processes SIGKILLed after the grace period, nothing of a job left running (grandchildren included), ports
in use named.  The pure parts (records, the choice of the process waited on, the guard's list) are in
``test_watch_units.py``."""
import os
import re
import signal
import socket
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

import flowlayers as flow
from flowlayers import launch, launch_guard, launch_job

HANG = str(Path(__file__).resolve().parents[1] / "process_programs" / "hang.py")
TIMEOUT = 40        # --timeout of the hang tests: start-up and compiling on a busy machine stay well within it
GRACE = 2


def launcher(*args, env=None):
    environ = dict(os.environ, FLOWLAYERS_BACKEND=flow.config.backend_name(), **(env or {}))
    for name in ("FLOWLAYERS_PROCESS_COUNT", "FLOWLAYERS_PROCESS_INDEX", "FLOWLAYERS_HEARTBEAT"):
        environ.pop(name, None)
    return subprocess.Popen([sys.executable, "-m", "flowlayers.launch", *args], stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, env=environ)


def started(pid):
    """Process ``pid``'s start time and whether it still runs (a zombie has ended); None once it is gone."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
    except FileNotFoundError:
        return None
    return int(fields[19]), fields[0] not in "ZX"


def pids(folder, count):
    """``[(pid, start time)]`` of each process and grandchild the programs recorded in ``folder``."""
    out = []
    for i in range(count):
        path = Path(folder) / f"pids.{i}"
        deadline = time.time() + 60
        while not path.exists() or not path.read_text().endswith("\n"):
            assert time.time() < deadline, f"no {path}"
            time.sleep(0.1)
        p, t, g, u = map(int, path.read_text().split())
        out += [(p, t), (g, u)]
    return out


def left_running(recorded, within=5.0):
    """Those of ``recorded`` (pid, start time) still running ``within`` seconds from now (a pid reused since by
    another process does not count)."""
    deadline = time.time() + within
    while True:
        alive = [(p, t) for p, t in recorded if started(p) is not None and started(p) == (t, True)]
        if not alive or time.time() > deadline:
            return alive
        time.sleep(0.1)


def kill_all(recorded):
    for p, t in left_running(recorded, 0):
        os.kill(p, signal.SIGKILL)


@pytest.mark.slow
@pytest.mark.parametrize("hang", ["before", "step"])
def test_a_hung_process_is_named_within_the_timeout_and_nothing_of_the_job_is_left(hang, tmp_path):
    """Process 1 hangs before its first step (its peer goes on and waits on it), or after step 5 (its peer begins
    step 6 and waits in the collective): the watch names process 1, not the peer that waits on it."""
    t0 = time.time()
    proc = launcher("--processes", "2", "--timeout", str(TIMEOUT), "--grace-period", str(GRACE), HANG, str(tmp_path),
                    "--hang", hang)
    recorded = pids(tmp_path, 2)
    try:
        out = proc.communicate(timeout=TIMEOUT + 120)[0]
        ended = time.time()
        assert proc.returncode == 1, out[-3000:]
        message = out[out.index("flowlayers.launch: "):]
        where = (r"starting, before its first step, while process 0 was (compiling, before its first step|at step 1)"
                 if hang == "before" else r"at step 5, while process 0 was at step (?P<peer>\d+)")
        found = re.search(rf"process 1 made no progress for {TIMEOUT} s \(--timeout\): it was {where};", message)
        assert found, message
        assert hang == "before" or int(found.group("peer")) > 5
        hung = float((tmp_path / "hung").read_text())
        assert ended - (t0 if hang == "before" else hung) < TIMEOUT + 10, (ended - t0, ended - hung)
        assert left_running(recorded) == []
    finally:
        proc.kill()
        kill_all(recorded)


SIGNALLED = """
    import os, signal, subprocess, sys, time
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    child = subprocess.Popen([sys.executable, "-c", "import signal, time; "
                              "signal.signal(signal.SIGTERM, signal.SIG_IGN); "
                              "signal.signal(signal.SIGINT, signal.SIG_IGN); print('ready', flush=True); "
                              "time.sleep(1000)"], stdout=subprocess.PIPE)
    child.stdout.readline()
    started = lambda pid: open(f"/proc/{{pid}}/stat").read().rsplit(")", 1)[1].split()[19]
    with open(os.path.join({out!r}, "pids." + os.environ["FLOWLAYERS_PROCESS_INDEX"]), "w") as f:
        f.write(f"{{os.getpid()}} {{started(os.getpid())}} {{child.pid}} {{started(child.pid)}}\\n")
    time.sleep(1000)
"""


def ignoring_signals(tmp_path):
    """A launcher of 2 processes that ignore SIGTERM and SIGINT, each with a grandchild that does too; and their
    pids."""
    path = tmp_path / "script.py"
    path.write_text(textwrap.dedent(SIGNALLED.format(out=str(tmp_path))))
    proc = launcher("--processes", "2", "--grace-period", str(GRACE), str(path))
    return proc, pids(tmp_path, 2)


@pytest.mark.slow
@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_processes_ignoring_a_forwarded_signal_are_killed_after_the_grace_period(signum, tmp_path):
    proc, recorded = ignoring_signals(tmp_path)
    try:
        t0 = time.time()
        proc.send_signal(signum)
        out = proc.communicate(timeout=GRACE + 20)[0]
        assert proc.returncode == 128 + signum
        assert GRACE <= time.time() - t0 < GRACE + 10
        name = signal.Signals(signum).name
        assert (f"flowlayers.launch: received {name}; stopped process(es) [0, 1]; process(es) [0, 1] did not exit "
                f"within --grace-period {GRACE} s of {name} and were killed by SIGKILL") in out, out
        assert left_running(recorded) == []
    finally:
        proc.kill()
        kill_all(recorded)


@pytest.mark.slow
def test_a_sigkilled_launcher_leaves_no_process_of_its_job(tmp_path):
    proc, recorded = ignoring_signals(tmp_path)
    try:
        proc.kill()
        proc.wait(timeout=10)
        assert left_running(recorded, within=10) == []
    finally:
        kill_all(recorded)


@pytest.fixture
def listening():
    """A port this test listens on, as another program would."""
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    s.listen()
    yield s.getsockname()[1]
    s.close()


@pytest.mark.slow
@pytest.mark.parametrize("offset, what", [(0, "process 0's coordinator"), (2, "process 1's server")])
def test_a_port_in_use_is_named_before_anything_starts(offset, what, listening, tmp_path):
    path = tmp_path / "script.py"
    path.write_text("print('started')\n")
    proc = launcher("--processes", "2", "--coordinator", f"127.0.0.1:{listening - offset}", str(path))
    out = proc.communicate(timeout=60)[0]
    assert proc.returncode == 2 and "started" not in out, out
    assert (f"flowlayers.launch: error: --coordinator 127.0.0.1:{listening - offset}: expected ports this host's "
            f"processes can listen on, received port {listening} ({what}): Address already in use") in out, out


TAKES_ITS_PORT = """
    import os, subprocess, sys, time
    port = int(os.environ["FLOWLAYERS_COORDINATOR"].rsplit(":", 1)[1])
    if os.environ["FLOWLAYERS_PROCESS_INDEX"] == "0":     # another program takes the port, and the process fails
        holder = subprocess.Popen([sys.executable, "-c", "import socket, sys, time; s = socket.socket(); "
                                   "s.bind(('127.0.0.1', int(sys.argv[1]))); s.listen(); print('listening', "
                                   "flush=True); time.sleep(60)", str(port)], stdout=subprocess.PIPE,
                                  start_new_session=True)
        holder.stdout.readline()
        with open({out!r}, "w") as f:
            f.write(str(holder.pid))
        sys.exit(7)
    time.sleep(60)
"""


@pytest.mark.slow
def test_a_port_taken_when_a_process_fails_at_start_is_named(tmp_path):
    path, holder = tmp_path / "script.py", tmp_path / "holder"
    path.write_text(textwrap.dedent(TAKES_ITS_PORT.format(out=str(holder))))
    proc = launcher("--processes", "2", "--grace-period", str(GRACE), str(path))
    try:
        out = proc.communicate(timeout=60)[0]
        assert proc.returncode == 7, out
        assert re.search(r"flowlayers.launch: process 0 exited with code 7; stopped process\(es\) \[1\]; in use on "
                         r"this host by another program: port \d+ \(process 0's coordinator\): Address already in "
                         r"use", out), out
    finally:
        proc.kill()
        if holder.exists():
            os.kill(int(holder.read_text()), signal.SIGKILL)


@pytest.mark.slow
def test_a_timeout_of_zero_never_stops_a_silent_job_and_the_launcher_leaves_no_file(tmp_path):
    path, temp = tmp_path / "script.py", tmp_path / "temp"
    path.write_text("import time\ntime.sleep(1.5)\nprint('slept')\n")
    temp.mkdir()
    proc = launcher("--processes", "2", "--timeout", "0", str(path), env={"TMPDIR": str(temp)})
    out = proc.communicate(timeout=60)[0]
    assert proc.returncode == 0 and out.count("slept") == 2, out
    assert list(temp.iterdir()) == []           # its heartbeat files are gone with it


def ignores(pid, signals):
    """Whether process ``pid`` ignores every one of ``signals`` (its SigIgn mask)."""
    with open(f"/proc/{pid}/status") as f:
        mask = int(next(line for line in f if line.startswith("SigIgn:")).split()[1], 16)
    return all(mask >> (s - 1) & 1 for s in signals)


def pipe_ends(fd):
    """How many of this process's descriptors are open on the pipe that descriptor ``fd`` is open on."""
    pipe = os.readlink(f"/proc/self/fd/{fd}")
    return sum(os.readlink(f"/proc/self/fd/{d}") == pipe for d in os.listdir("/proc/self/fd")
               if os.path.exists(f"/proc/self/fd/{d}"))


@pytest.mark.slow
def test_the_guard_kills_the_groups_still_named_when_its_pipe_ends():
    guard = launch_guard.Guard()
    kept, taken_back = (subprocess.Popen(["sleep", "1000"], start_new_session=True) for _ in range(2))
    try:
        guard.started(kept.pid)
        guard.started(taken_back.pid)
        guard.collected(taken_back.pid)
        quiet = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
        deadline = time.time() + 30
        while not ignores(guard.proc.pid, quiet):
            assert time.time() < deadline and guard.proc.poll() is None
            time.sleep(0.02)
        for s in quiet:         # sent to everything of a user, say: the guard outlasts them
            os.kill(guard.proc.pid, s)
        assert pipe_ends(guard._write) == 1         # only the launcher holds the pipe: its end is the guard's cue
        guard.close()
        assert kept.wait(timeout=10) == -signal.SIGKILL
        assert taken_back.poll() is None and guard.proc.returncode == 0
    finally:
        for p in (kept, taken_back):
            p.kill()
            p.wait()


class Told:
    """What a launcher told its guard of the groups it collected."""

    def __init__(self):
        self.groups = []

    def collected(self, pgid):
        self.groups.append(pgid)


@pytest.mark.slow
def test_a_process_that_exits_takes_the_children_it_left_with_it():
    proc = subprocess.Popen(["sh", "-c", "sleep 1000 & echo $!"], stdout=subprocess.PIPE, text=True,
                            start_new_session=True)
    child = int(proc.stdout.readline())
    recorded = [(child, started(child)[0])]
    told, deadline = Told(), time.time() + 30
    try:
        while not launch_job.ended(proc, told):
            assert time.time() < deadline
            time.sleep(0.02)
        assert proc.returncode == 0 and told.groups == [proc.pid]
        assert left_running(recorded) == []
    finally:
        kill_all(recorded)


def children_of(pid):
    out = []
    for entry in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{entry}/stat") as f:
                if int(f.read().rsplit(")", 1)[1].split()[1]) == pid:
                    out.append(int(entry))
        except (FileNotFoundError, ProcessLookupError):      # ended meanwhile
            pass
    return out


@pytest.mark.slow
def test_without_its_guard_a_sigkilled_launchers_processes_still_die_with_it(tmp_path):
    proc, recorded = ignoring_signals(tmp_path)
    try:
        guards = [p for p in children_of(proc.pid) if b"launch_guard.py" in Path(f"/proc/{p}/cmdline").read_bytes()]
        assert len(guards) == 1
        os.kill(guards[0], signal.SIGKILL)
        proc.kill()
        proc.wait(timeout=10)
        assert left_running(recorded[::2], within=10) == []      # the parent-death signal; not the grandchildren
    finally:
        kill_all(recorded)
