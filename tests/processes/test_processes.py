"""One program over several processes, on the backend under test (``$FLOWLAYERS_BACKEND``), started as a user
starts it (``python -m flowlayers.launch``) on 127.0.0.1, against the same program in one process.

``tests/process_programs/train.py`` trains both faces and writes what every process received; each process must
hold the whole logical values.  References: one process of 4 devices (≤ 1e-6: the same mesh) and one device
(≤ 1e-5: other summation orders).
"""
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

import flowlayers as flow

pytestmark = pytest.mark.slow     # every test starts a job of processes

PROGRAM = str(Path(__file__).resolve().parents[1] / "process_programs" / "train.py")
BACKEND = flow.config.backend_name()
TIMEOUT = 300


def environment(devices):
    env = dict(os.environ, FLOWLAYERS_BACKEND=BACKEND, FLOWLAYERS_CPU_DEVICES=str(devices))
    for name in ("FLOWLAYERS_PROCESS_COUNT", "FLOWLAYERS_PROCESS_INDEX"):
        env.pop(name, None)
    return env


def run(out, *args, processes=1, devices=2, expect_failure=False):
    """``train.py out args`` in ``processes`` processes (the launcher) of ``devices`` devices; the outputs of each
    process, or (returncode, output, seconds) where it is expected to fail."""
    cmd = [sys.executable, PROGRAM, str(out), "--devices", str(devices), *args]
    if processes > 1:
        cmd = [sys.executable, "-m", "flowlayers.launch", "--processes", str(processes), "--devices-per-process",
               str(devices), *cmd[1:]]
    t0 = time.time()
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=TIMEOUT, env=environment(devices))
    if expect_failure:
        return r.returncode, r.stdout + r.stderr, time.time() - t0
    assert r.returncode == 0, (r.stdout + r.stderr)[-4000:]
    return [dict(np.load(f"{out}.{i}.npz")) for i in range(processes)]


def assert_close(got, want, tol, keys=None):
    """Weights within ``tol``; outputs (predictions, losses) within ``tol`` absolute or relative."""
    keys = keys or [k for k in want if k not in ("processes", "first")]
    for key in keys:
        weight = key.startswith(("w", "job:"))
        np.testing.assert_allclose(got[key], want[key], rtol=0 if weight else tol, atol=tol, err_msg=key)


@pytest.fixture(scope="module")
def one_device(tmp_path_factory):
    """The program on one device, per view (the mirrored view's model has no batch norm)."""
    runs = {}

    def reference(view):
        if view not in runs:
            runs[view] = run(tmp_path_factory.mktemp("one") / "out", "--view", view, "--oneflow", devices=1)[0]
        return runs[view]
    return reference


@pytest.fixture(scope="module", params=["consistent", "mirrored"])
def both(request, tmp_path_factory):
    """(view, 2 processes x 2 devices, 1 process x 4 devices, the 2-process run's checkpoint)."""
    view, tmp = request.param, tmp_path_factory.mktemp(request.param)
    ckpt = tmp / "ckpt"
    two = run(tmp / "two", "--view", view, "--oneflow", "--save", str(ckpt), processes=2, devices=2)
    four = run(tmp / "four", "--view", view, "--oneflow", devices=4)[0]
    return view, two, four, ckpt


def test_two_processes_train_as_one_process_of_four_devices(both, one_device):
    view, two, four, _ = both
    for i, got in enumerate(two):
        assert list(got["processes"]) == [i, 2, 4]
        assert_close(got, four, 1e-6)
        assert_close(got, one_device(view), 1e-5)
    assert any(k.startswith("job:") for k in two[0]) and len(two[0]["predict"]) == 96


def test_a_checkpoint_of_two_processes_loads_in_one_and_in_four(both, tmp_path):
    view, two, _, ckpt = both
    one = run(tmp_path / "one", "--view", view, "--load", str(ckpt), devices=1)[0]
    four = run(tmp_path / "four", "--view", view, "--load", str(ckpt), processes=4, devices=1)
    weights = [k for k in two[0] if k.startswith("w")]
    for got in [one] + four:
        for k in weights:
            np.testing.assert_array_equal(got[k], two[0][k], err_msg=k)
        assert_close(got, two[0], 1e-5, ["predict", "evaluate"])


@pytest.mark.parametrize("mesh", ["data=2,model=2", "model=2,data=2"], ids=["model-inside", "model-across"])
def test_a_data_model_mesh_spans_the_processes(mesh, tmp_path, one_device):
    two = run(tmp_path / "two", "--mesh", mesh, "--split", processes=2, devices=2)
    four = run(tmp_path / "four", "--mesh", mesh, "--split", devices=4)[0]
    for got in two:
        assert_close(got, four, 1e-6)
        assert_close(got, one_device("consistent"), 1e-5, [k for k in four if not k.startswith(("job", "processes", "first"))])


def test_two_hosts_each_with_its_launcher(tmp_path):
    """The several-host path on one machine: two launchers, one per "host" (both 127.0.0.1), joined through the
    coordinator address they are given, as two hosts would be."""
    from flowlayers.launch import free_ports

    coordinator = f"127.0.0.1:{free_ports(1)[0]}"
    launchers = [subprocess.Popen([sys.executable, "-m", "flowlayers.launch", "--hosts", "127.0.0.1,127.0.0.1",
                                   "--host-index", str(h), "--coordinator", coordinator, "--processes", "1",
                                   "--devices-per-process", "2", PROGRAM, str(tmp_path / "out"), "--devices", "2"],
                                  stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                  env=environment(2)) for h in range(2)]
    outs = [p.communicate(timeout=TIMEOUT)[0] for p in launchers]
    assert [p.returncode for p in launchers] == [0, 0], "\n".join(o[-2000:] for o in outs)
    assert "[process 1] done: process 1 of 2" in outs[1] and "[process 0] " not in outs[1]
    got = [dict(np.load(tmp_path / f"out.{i}.npz")) for i in range(2)]
    assert [list(g["processes"]) for g in got] == [[0, 2, 4], [1, 2, 4]]
    assert_close(got[1], got[0], 0)


@pytest.mark.parametrize("kind", ["sequence", "dataset"])
def test_each_process_feeds_its_share_of_every_batch(kind, tmp_path):
    if kind == "dataset":
        pytest.importorskip("tensorflow")
    two = run(tmp_path / "two", "--shares", kind, processes=2, devices=2)
    four = run(tmp_path / "four", "--shares", kind, devices=4)[0]
    for got in two:
        assert_close(got, four, 1e-6)


def test_a_killed_process_stops_the_job_and_a_relaunch_resumes_exactly(tmp_path):
    backup = tmp_path / "backup"
    code, out, _ = run(tmp_path / "killed", "--backup", str(backup), "--kill-at", "5", processes=2,
                             expect_failure=True)
    assert code != 0 and "flowlayers.launch: process 1 was killed by SIGKILL" in out, out[-3000:]
    assert time.time() - float((backup / "killed").read_text()) < 60      # the launcher exited within 60 s of it
    resumed = run(tmp_path / "resumed", "--backup", str(backup), "--kill-at", "5", processes=2)
    whole = run(tmp_path / "whole", processes=2)
    for got in resumed:
        assert list(got["first"]) == [0, 4, 4]       # the backup of step 4, at batch 4 of epoch 0
        assert_close(got, whole[0], 1e-6, [k for k in whole[0] if k.startswith("w")] + ["predict"])


def test_a_job_resumes_on_fewer_processes_from_the_same_step(tmp_path):
    backup = tmp_path / "backup"
    code, out, _ = run(tmp_path / "killed", "--view", "mirrored", "--backup", str(backup), "--kill-at", "5",
                       processes=2, expect_failure=True)
    assert code != 0 and "process 1 was killed by SIGKILL" in out, out[-3000:]
    resumed = run(tmp_path / "resumed", "--view", "mirrored", "--backup", str(backup), processes=1, devices=2)[0]
    whole = run(tmp_path / "whole", "--view", "mirrored", processes=2)[0]
    assert list(resumed["first"]) == [0, 4, 4] and list(resumed["processes"]) == [0, 1, 2]
    assert_close(resumed, whole, 1e-5, [k for k in whole if k.startswith("w")] + ["predict", "evaluate"])
