"""Jobs started without ``python -m flowlayers.launch``: two plain ``python train.py`` processes given only the
variables that SLURM's ``srun``, Open MPI's ``mpirun`` (the real one, where installed), a Kubernetes Indexed Job
or ``TF_CONFIG`` give them run as one job of 2 processes x 2 devices, on the backend under test, and end with the
weights of one process of 4 devices (<= 1e-6: the same mesh).  The emulated systems run on 127.0.0.1."""
import json
import os
import random
import shutil
import socket
import subprocess
import sys

import numpy as np
import pytest

from flowlayers.framework import detect
from test_processes import PROGRAM, TIMEOUT, assert_close, environment

pytestmark = pytest.mark.slow

SYSTEMS = ["slurm", "mpirun", "kubernetes", "tf_config"]
FOREIGN = ("SLURM_", "OMPI_", "PMIX_", "JAX_COORDINATOR", "FLOWLAYERS_HOSTS", "TF_CONFIG", "JOB_COMPLETION_INDEX")


def plain(devices):
    """This test's environment for a program, without any system's variables."""
    return {k: v for k, v in environment(devices).items() if not k.startswith(FOREIGN)}


def free(*ports):
    for port in ports:
        with socket.socket() as s:
            s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            try:
                s.bind(("", port))
            except OSError:
                return False
    return True


def slurm_job(tasks=2):
    """A job id whose derived ports (JAX's coordinator and the tasks' servers after it) are free now."""
    for _ in range(200):
        job = random.randrange(10_000, 10_000_000)
        base = detect.derived_port(job)
        if free(*(detect.port_after(base, k) for k in range(1 + tasks))):
            return job
    raise RuntimeError("no free ports among the top 4096")


def free_base():
    for _ in range(200):
        base = random.randrange(20_000, 40_000)
        if free(base, base + 1, base + 2):
            return base
    raise RuntimeError("no 3 free ports")


def variables(system, i):
    """What ``system`` gives process ``i`` of 2 (one node, 127.0.0.1)."""
    if system == "slurm":
        job = variables.job
        return {"SLURM_JOB_ID": str(job), "SLURM_JOBID": str(job), "SLURM_STEP_ID": "0", "SLURM_NTASKS": "2",
                "SLURM_NPROCS": "2", "SLURM_STEP_NUM_TASKS": "2", "SLURM_STEP_NUM_NODES": "1",
                "SLURM_STEP_NODELIST": "127.0.0.1", "SLURM_NODELIST": "127.0.0.1", "SLURM_STEP_TASKS_PER_NODE": "2",
                "SLURM_TASKS_PER_NODE": "2", "SLURM_PROCID": str(i), "SLURM_LOCALID": str(i), "SLURM_NODEID": "0"}
    if system == "kubernetes":
        return {"JOB_COMPLETION_INDEX": str(i), "FLOWLAYERS_HOSTS": "127.0.0.1,127.0.0.1",
                "JAX_COORDINATOR_PORT": str(variables.base)}
    workers = [f"127.0.0.1:{variables.base + k}" for k in (1, 2)]
    return {"TF_CONFIG": json.dumps({"cluster": {"worker": workers}, "task": {"type": "worker", "index": i}})}


def run_pair(system, out, view):
    """``train.py out`` in 2 processes started as ``system`` starts them; the outputs of each, and process 0's
    output."""
    args = [str(out), "--devices", "2", "--view", view]
    variables.job, variables.base = slurm_job(), free_base()
    if system == "mpirun":
        cmd = ["mpirun", "--allow-run-as-root", "--oversubscribe", "-n", "2", sys.executable, PROGRAM, *args]
        env = {**plain(2), "JAX_COORDINATOR_PORT": str(variables.base)}   # JAX's own override: a port free now
        r = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=TIMEOUT)
        assert r.returncode == 0, (r.stdout + r.stderr)[-4000:]
        said = r.stderr
    else:
        procs = [subprocess.Popen([sys.executable, PROGRAM, *args], env={**plain(2), **variables(system, i)},
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for i in range(2)]
        try:
            outs = [p.communicate(timeout=TIMEOUT) for p in procs]
        finally:
            for p in procs:         # none left running, whatever happened
                p.kill()
                p.wait()
        assert [p.returncode for p in procs] == [0, 0], "\n".join((o + e)[-3000:] for o, e in outs)
        said = outs[0][1]
    return [dict(np.load(f"{out}.{i}.npz")) for i in range(2)], said


@pytest.fixture(scope="module")
def four_devices(tmp_path_factory):
    runs = {}

    def reference(view):
        if view not in runs:
            out = tmp_path_factory.mktemp("four") / "out"
            r = subprocess.run([sys.executable, PROGRAM, str(out), "--devices", "4", "--view", view], env=plain(4),
                               capture_output=True, text=True, timeout=TIMEOUT)
            assert r.returncode == 0, (r.stdout + r.stderr)[-4000:]
            runs[view] = dict(np.load(f"{out}.0.npz"))
        return runs[view]
    return reference


WHO = {"slurm": "SLURM (job", "mpirun": "Open MPI (OMPI_COMM_WORLD_SIZE=2", "kubernetes": "Kubernetes (",
       "tf_config": "TF_CONFIG (0 chief, 2 worker(s)"}


@pytest.mark.parametrize("view", ["consistent", "mirrored"])
@pytest.mark.parametrize("system", SYSTEMS)
def test_two_plain_processes_started_by_a_cluster_system_run_as_one_job(system, view, tmp_path, four_devices):
    if system == "mpirun" and shutil.which("mpirun") is None:
        pytest.skip("Open MPI's mpirun is not installed (Debian: apt-get install -y openmpi-bin)")
    got, said = run_pair(system, tmp_path / "out", view)
    for i, g in enumerate(got):
        assert list(g["processes"]) == [i, 2, 4]            # flow.env.process_index(), process_count(), devices
        assert_close(g, four_devices(view), 1e-6)
    assert f"flowlayers: {WHO[system]}" in said and "process 0 of 2" in said, said[-2000:]
