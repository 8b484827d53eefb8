"""``--elastic``: two launchers of 2 processes each, as two hosts on 127.0.0.1, one rendezvous (the first
launcher's).  The second launcher is SIGKILLed with its processes in epoch 2: the first starts the job again alone
from the last backup; started again, the second is taken in at the next restart point (the next backup).  Data
parallel training with the same global batch ends with the weights of an uninterrupted run (<= 1e-5: other
summation orders) whatever the process count.  Every wait here is bounded, and no process is left running."""
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest

from test_processes import assert_close, environment

pytestmark = pytest.mark.slow

PROGRAM = str(Path(__file__).resolve().parents[1] / "process_programs" / "elastic.py")
HOSTS = "127.0.0.1,127.0.0.1"


def free_block(n):
    """A port whose next ``n - 1`` ports are free too (the coordinator, 4 processes' servers, the rendezvous)."""
    for _ in range(100):
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            base = s.getsockname()[1]
        if base + n > 65535:
            continue
        taken = False
        for port in range(base, base + n):
            with socket.socket() as s:
                s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
                try:
                    s.bind(("", port))
                except OSError:
                    taken = True
                    break
        if not taken:
            return base
    raise RuntimeError("no block of free ports")


class Launcher:
    """One host's ``python -m flowlayers.launch --elastic 1:2``, its output read as it comes."""

    def __init__(self, host, port, out, backup, view):
        cmd = [sys.executable, "-m", "flowlayers.launch", "--hosts", HOSTS, "--host-index", str(host),
               "--coordinator", f"127.0.0.1:{port}", "--processes", "2", "--devices-per-process", "1",
               "--elastic", "1:2", "--max-restarts", "3", "--grace-period", "3", "--join-timeout", "120",
               PROGRAM, str(out), "--devices", "1", "--view", view, "--backup", str(backup), "--pace", "1"]
        self.proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                     env=environment(1), start_new_session=True)
        self.lines = []
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self):
        for line in self.proc.stdout:
            self.lines.append(line.rstrip("\n"))

    def wait_for(self, pattern, seconds, after=0):
        """The index of the first line from ``after`` on matching ``pattern``, within ``seconds``."""
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            for i in range(after, len(self.lines)):
                if re.search(pattern, self.lines[i]):
                    return i
            if self.proc.poll() is not None and not self.reader.is_alive():
                break
            time.sleep(0.2)
        raise AssertionError(f"no line matching {pattern!r} within {seconds} s:\n" + "\n".join(self.lines[-60:]))

    def finish(self, seconds):
        self.proc.wait(timeout=seconds)
        self.reader.join(timeout=10)
        return self.proc.returncode

    def kill(self):
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(timeout=30)


def left_running(marker):
    """Processes whose command line names ``marker`` (this test's folder)."""
    out = []
    for entry in filter(str.isdigit, os.listdir("/proc")):
        try:
            cmdline = Path(f"/proc/{entry}/cmdline").read_bytes()
        except OSError:
            continue
        if marker.encode() in cmdline and int(entry) != os.getpid():
            out.append(int(entry))
    return out


def assert_none_left(marker, within=30):
    deadline = time.monotonic() + within
    while left_running(marker) and time.monotonic() < deadline:
        time.sleep(0.5)
    left = left_running(marker)
    for pid in left:
        os.kill(pid, signal.SIGKILL)
    assert left == [], f"processes left running: {left}"


@pytest.fixture(scope="module")
def uninterrupted(tmp_path_factory):
    runs = {}

    def reference(view):
        if view not in runs:
            out = tmp_path_factory.mktemp("whole") / "out"
            r = subprocess.run([sys.executable, PROGRAM, str(out), "--devices", "4", "--view", view],
                               env=environment(4), capture_output=True, text=True, timeout=600)
            assert r.returncode == 0, (r.stdout + r.stderr)[-3000:]
            runs[view] = dict(np.load(f"{out}.0.npz"))
        return runs[view]
    return reference


def weights(got, want):
    assert_close(got, want, 1e-5, [k for k in want if k.startswith("w")] + ["predict"])


def start_both_and_lose_the_second(tmp_path, view):
    port, out, backup = free_block(6), tmp_path / "out", tmp_path / "backup"
    first, second = Launcher(0, port, out, backup, view), Launcher(1, port, out, backup, view)
    first.wait_for(r"starting the job on host\(s\) \[0, 1\] of --hosts \(4 processes\)", 180)
    begun = first.wait_for(r"^\[process 0\] epoch 2 begins", 300)
    second.kill()           # the launcher alone: its guard takes its processes with it
    alone = first.wait_for(r"flowlayers.launch: starting the job on host\(s\) \[0\] of --hosts \(2 processes\) "
                           r"after: host 1's launcher is gone", 120, after=begun)
    return port, out, backup, first, alone


@pytest.mark.parametrize("view", ["consistent", "mirrored"])
def test_a_lost_host_leaves_the_others_to_finish_alone(view, tmp_path, uninterrupted):
    first = None
    try:
        _, out, _, first, alone = start_both_and_lose_the_second(tmp_path, view)
        assert first.finish(600) == 0, "\n".join(first.lines[-60:])
        assert "[process 0] done: process 0 of 2" in first.lines[alone:]
        for i in range(2):
            got = dict(np.load(f"{out}.{i}.npz"))
            assert list(got["processes"]) == [i, 2, 2] and got["first"][2] >= 6     # resumed from a backup
            weights(got, uninterrupted(view))
    finally:
        if first:
            first.kill()
        assert_none_left(str(tmp_path))


@pytest.mark.parametrize("view", ["consistent", "mirrored"])
def test_a_host_that_comes_back_is_taken_in_at_the_next_restart_point(view, tmp_path, uninterrupted):
    first = again = None
    try:
        port, out, backup, first, alone = start_both_and_lose_the_second(tmp_path, view)
        first.wait_for(r"^\[process 0\] epoch \d+ begins at step", 300, after=alone)     # stepping alone
        again = Launcher(1, port, out, backup, view)
        joined = first.wait_for(r"flowlayers.launch: starting the job on host\(s\) \[0, 1\] of --hosts "
                                r"\(4 processes\) after: a host joined at the restart point", 300, after=alone)
        assert any("stopped at the restart point asked for" in line for line in first.lines[alone:joined])
        assert first.finish(600) == 0, "\n".join(first.lines[-60:])
        assert again.finish(120) == 0, "\n".join(again.lines[-60:])
        for i in range(4):
            got = dict(np.load(f"{out}.{i}.npz"))
            assert list(got["processes"]) == [i, 4, 4] and got["first"][2] > 6    # resumed after the lone start's
            weights(got, uninterrupted(view))
    finally:
        for launcher in (first, again):
            if launcher:
                launcher.kill()
        assert_none_left(str(tmp_path))
