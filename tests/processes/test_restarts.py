"""``--max-restarts`` (the whole job started again after a failure, at most N times, each failure named) and the
launcher's output (engines' chatter kept out unless ``--verbose``).  Scripts without an engine, except the last
tests, which train ``process_programs/train.py`` and kill a process mid-epoch."""
import re
import signal
import subprocess
import sys
import textwrap
import time

import numpy as np
import pytest

from flowlayers import launch_logs
from test_processes import PROGRAM, assert_close, environment, run as run_train

pytestmark = pytest.mark.slow


def script(tmp_path, body):
    path = tmp_path / "script.py"
    path.write_text(textwrap.dedent(body))
    return str(path)


def launched(*args, timeout=120):
    return subprocess.run([sys.executable, "-m", "flowlayers.launch", *args], capture_output=True, text=True,
                          timeout=timeout)


COUNTING = """
    import os, sys, time, flowlayers as flow
    starts = os.path.join({folder!r}, f"starts-{{flow.env.process_index()}}")
    with open(starts, "a") as f:
        f.write("x")
    n = len(open(starts).read())
    print("start", n, "port", flow.env.cluster().coordinator, flush=True)
    if flow.env.process_index() == 1 and n <= {fail_times}:
        other, deadline = os.path.join({folder!r}, "starts-0"), time.time() + 60
        while time.time() < deadline and (not os.path.exists(other) or len(open(other).read()) < n):
            time.sleep(0.05)        # fail once process 0 has started too (on a loaded machine it starts later)
        sys.exit(3)
    time.sleep(0.5 if flow.env.process_index() == 1 else 1)
"""


def test_a_failure_restarts_the_whole_job_and_it_ends_well(tmp_path):
    path = script(tmp_path, COUNTING.format(folder=str(tmp_path), fail_times=1))
    r = launched("--processes", "2", "--max-restarts", "1", path)
    assert r.returncode == 0, r.stdout + r.stderr
    assert ("flowlayers.launch: process 1 exited with code 3; stopped process(es) [0]; restarting the job "
            "(restart 1 of 1)") in r.stdout
    assert (tmp_path / "starts-0").read_text() == "xx" and (tmp_path / "starts-1").read_text() == "xx"
    ports = {line.split()[-1] for line in r.stdout.splitlines() if " port " in line}
    assert len(ports) == 2          # one host: each start gets fresh free ports


def test_restarts_are_bounded_and_each_failure_is_named(tmp_path):
    path = script(tmp_path, COUNTING.format(folder=str(tmp_path), fail_times=10))
    r = launched("--processes", "2", "--max-restarts", "2", path)
    assert r.returncode == 3
    lines = [line for line in r.stdout.splitlines() if line.startswith("flowlayers.launch: ")]
    assert lines == [f"flowlayers.launch: process 1 exited with code 3; stopped process(es) [0]; restarting the job "
                     f"(restart {k} of 2)" for k in (1, 2)] + [
        "flowlayers.launch: process 1 exited with code 3; stopped process(es) [0]"]
    assert (tmp_path / "starts-1").read_text() == "xxx"


def test_without_max_restarts_a_failure_ends_the_job(tmp_path):
    path = script(tmp_path, COUNTING.format(folder=str(tmp_path), fail_times=1))
    r = launched("--processes", "2", path)
    assert r.returncode == 3 and "restarting" not in r.stdout
    assert (tmp_path / "starts-1").read_text() == "x"


def test_a_hang_is_a_failure_that_restarts(tmp_path):
    path = script(tmp_path, """
        import os, time, flowlayers as flow
        marker = os.path.join(%r, "hung")
        flow.env.heartbeat()
        if flow.env.process_index() == 0 and not os.path.exists(marker):
            open(marker, "w").close()
            time.sleep(120)
    """ % str(tmp_path))
    t0 = time.time()
    r = launched("--processes", "2", "--timeout", "15", "--max-restarts", "1", path)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "process 0 made no progress for 15 s (--timeout)" in r.stdout and "(restart 1 of 1)" in r.stdout
    assert time.time() - t0 < 100


def test_a_signal_to_the_launcher_is_not_a_failure_to_restart(tmp_path):
    path = script(tmp_path, """
        import time
        print("ready", flush=True)
        time.sleep(120)
    """)
    proc = subprocess.Popen([sys.executable, "-m", "flowlayers.launch", "--processes", "2", "--max-restarts", "3",
                             path], stdout=subprocess.PIPE, text=True)
    ready = 0
    while ready < 2:
        ready += "ready" in proc.stdout.readline()
    proc.send_signal(signal.SIGTERM)
    out = proc.communicate(timeout=30)[0]
    assert proc.returncode == 143 and "restarting" not in out


@pytest.mark.parametrize("args, message", [
    (["--max-restarts", "-1"], "--max-restarts: expected 0 or more, received -1"),
    (["--elastic", "1:2"], "--elastic: expected MIN:MAX hosts with 1 <= MIN <= MAX <= 1"),
    (["--hosts", "a,b", "--coordinator", "a:1", "--elastic", "2:1"], "--elastic: expected MIN:MAX hosts"),
    (["--hosts", "a,b", "--coordinator", "a:1", "--elastic", "x"], "received 'x'"),
    (["--elastic", "1:1"], "--elastic: expected --coordinator HOST:PORT"),
    (["--hosts", "a,b", "--coordinator", "a:65533", "--elastic", "1:2"], "expected a port 1..65532"),
    (["--join-timeout", "nan"], "--join-timeout: expected a finite number of seconds >= 0, received nan"),
])
def test_restart_and_elastic_arguments_are_checked(args, message):
    r = launched(*args, "x.py")
    assert r.returncode == 2 and message in r.stderr, r.stderr


GLOO = b"Expected number of connected peer ranks is : 3"


@pytest.mark.parametrize("line, dropped", [
    (b"[Gloo] Rank 1 is connected to 3 peer ranks. " + GLOO, True),
    (b"[Gloo] Rank [Gloo] Rank 2 is connected to 3 peer ranks. " + GLOO, True),     # two threads at once
    (b"3 is connected to 3 peer ranks. " + GLOO, True),
    (b"WARNING: All log messages before absl::InitializeLog() is called are written to STDERR", True),
    (b"I0000 00:00:1795805408.718322    6724 port.cc:153] oneDNN custom operations are on.", True),
    (b"W0000 00:00:1795805408.718322    6724 grpc_server.cc:12] something", True),
    (b"E0000 00:00:1795805408.718322    6724 collective.cc:1] an error", False),      # errors are shown
    (b"[Gloo] Rank 1 is connected to 3 peer ranks. loss: 0.3", False),              # a user's text mixed in
    (b"Epoch 1/3", False),
    (b"I think 3 is connected", False),
])
def test_the_engines_chatter_is_told_from_other_lines(line, dropped):
    assert launch_logs.chatter(line + b"\n") is dropped


CHATTY = """
    import os, sys, flowlayers as flow
    print("[Gloo] Rank 1 is connected to 3 peer ranks. Expected number of connected peer ranks is : 3", flush=True)
    sys.stderr.write("I0000 00:00:1795805408.718322    6724 port.cc:153] oneDNN custom operations are on.\\n")
    print("mine", flow.env.process_index(), flow.env.speaks(), os.environ.get("FLOWLAYERS_VERBOSE"), flush=True)
"""


def test_output_reads_like_one_job_unless_verbose(tmp_path):
    path = script(tmp_path, CHATTY)
    quiet = launched("--processes", "2", path)
    assert quiet.returncode == 0 and "Gloo" not in quiet.stdout and "oneDNN" not in quiet.stdout
    assert "[process 0] mine 0 True None" in quiet.stdout and "[process 1] mine 1 False None" in quiet.stdout
    loud = launched("--processes", "2", "--verbose", path)
    assert loud.stdout.count("[Gloo] Rank 1") == 2 and loud.stdout.count("oneDNN") == 2
    assert "[process 1] mine 1 True 1" in loud.stdout


@pytest.mark.parametrize("view", ["consistent", "mirrored"])
def test_max_restarts_after_a_sigkill_resumes_from_the_backup(view, tmp_path):
    """One process SIGKILLed after step 5 of 12 (its backup: step 4): the launcher starts the job again, which
    resumes at step 4 and ends with the weights of an uninterrupted run."""
    backup = tmp_path / "backup"
    cmd = [sys.executable, "-m", "flowlayers.launch", "--processes", "2", "--devices-per-process", "2",
           "--max-restarts", "1", "--grace-period", "3", PROGRAM, str(tmp_path / "restarted"), "--devices", "2",
           "--view", view, "--backup", str(backup), "--kill-at", "5"]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=600, env=environment(2))
    assert r.returncode == 0, (r.stdout + r.stderr)[-4000:]
    # JAX's distributed client holds SIGTERM: its processes may wait out --grace-period, then get SIGKILL
    assert re.search(r"flowlayers.launch: process 1 was killed by SIGKILL; stopped process\(es\) \[0\](; .* were "
                     r"killed by SIGKILL)?; restarting the job \(restart 1 of 1\)", r.stdout), r.stdout[-3000:]
    whole = run_train(tmp_path / "whole", "--view", view, processes=2)[0]
    for i in range(2):
        got = dict(np.load(tmp_path / f"restarted.{i}.npz"))
        assert list(got["first"]) == [0, 4, 4]          # resumed at step 4: 8 steps run after the restart, not 12
        assert_close(got, whole, 1e-6, [k for k in whole if k.startswith("w")] + ["predict"])
