"""The how-to's cluster examples (``docs/howto/processes.md``), run as written on this host: the sbatch script's
``srun`` line with the variables srun would give its tasks (all on 127.0.0.1), the ``mpirun`` line with Open MPI
itself, and the Kubernetes manifest's container command with what Kubernetes would set in each pod.  The program
is tutorial 09 (``--smoke``, a wiring check); every process must end with the same weights."""
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from test_started_by import free_base, plain, slurm_job

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
HOWTO = (ROOT / "docs" / "howto" / "processes.md").read_text()
BLOCKS = re.findall(r"```(\w+)\n(.*?)```", HOWTO, re.S)


def block(language, needle):
    found = [text for lang, text in BLOCKS if lang == language and needle in text]
    assert len(found) == 1, f"expected one {language} block with {needle!r} in the how-to, found {len(found)}"
    return found[0]


def finish(procs, timeout=600):
    """Wait for every process, none left running; their outputs."""
    try:
        outs = [p.communicate(timeout=timeout)[0] for p in procs]
    finally:
        for p in procs:
            p.kill()
            p.wait()
    assert [p.returncode for p in procs] == [0] * len(procs), "\n".join(o[-2000:] for o in outs)
    return outs


def one_job(text, count):
    assert f"process 0 of {count}:" in text, text[-3000:]
    sums = re.findall(r"process (\d): weights checksum ([0-9.]+)", text)
    assert sorted(int(i) for i, _ in sums) == list(range(count)) and len({s for _, s in sums}) == 1, text[-3000:]


def test_the_sbatch_scripts_srun_line(tmp_path):
    script = block("bash", "#SBATCH")
    nodes = int(re.search(r"#SBATCH --nodes=(\d+)", script).group(1))
    per_node = int(re.search(r"#SBATCH --ntasks-per-node=(\d+)", script).group(1))
    line = next(l for l in script.splitlines() if l.startswith("srun "))
    command = shlex.split(line.replace("$SLURM_SUBMIT_DIR", str(tmp_path)))[1:] + ["--smoke"]
    count, job = nodes * per_node, slurm_job(4)
    procs = []
    for i in range(count):          # the script's tasks, all on this host: one node of them all
        env = {**plain(1), "SLURM_JOB_ID": str(job), "SLURM_NTASKS": str(count), "SLURM_STEP_NUM_TASKS": str(count),
               "SLURM_STEP_NODELIST": "127.0.0.1", "SLURM_STEP_TASKS_PER_NODE": str(count), "SLURM_PROCID": str(i),
               "SLURM_LOCALID": str(i), "SLURM_NODEID": "0", "SLURM_SUBMIT_DIR": str(tmp_path)}
        procs.append(subprocess.Popen([sys.executable if command[0] == "python" else command[0], *command[1:]],
                                      cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True))
    one_job("".join(finish(procs)), count)


def test_the_mpirun_line(tmp_path):
    if shutil.which("mpirun") is None:
        pytest.skip("Open MPI's mpirun is not installed (Debian: apt-get install -y openmpi-bin)")
    line = next(l for l in block("bash", "mpirun -n").splitlines() if l.startswith("mpirun -n"))
    words = shlex.split(line)
    count = int(words[words.index("-n") + 1])
    # as root in a container Open MPI wants to be told; the line's own arguments follow unchanged
    command = ["mpirun", "--allow-run-as-root", "--oversubscribe", *words[1:], "--smoke", "--workdir", str(tmp_path)]
    command[command.index("python")] = sys.executable
    env = {**plain(1), "JAX_COORDINATOR_PORT": str(free_base())}
    r = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, (r.stdout + r.stderr)[-3000:]
    one_job(r.stdout, count)


def test_the_kubernetes_manifest(tmp_path):
    yaml = pytest.importorskip("yaml")
    documents = list(yaml.safe_load_all(block("yaml", "kind: Job")))
    service = next(d for d in documents if d["kind"] == "Service")
    job = next(d for d in documents if d["kind"] == "Job")
    spec, pod = job["spec"], job["spec"]["template"]["spec"]
    assert spec["completionMode"] == "Indexed" and pod["subdomain"] == service["metadata"]["name"]
    assert service["spec"]["clusterIP"] == "None"
    container = pod["containers"][0]
    env = {e["name"]: e["value"] for e in container["env"]}
    name, count = job["metadata"]["name"], spec["completions"]
    assert env["FLOWLAYERS_HOSTS"].split(",") == [f"{name}-{i}.{pod['subdomain']}" for i in range(count)]
    command = [sys.executable if w == "python" else w.replace("/shared/run09", str(tmp_path))
               for w in container["command"]] + ["--smoke"]
    # the pods' names do not resolve here: every pod is 127.0.0.1, on ports free now
    hosts, port = ",".join(["127.0.0.1"] * count), free_base()
    procs = [subprocess.Popen(command, cwd=ROOT, env={**plain(1), **env, "FLOWLAYERS_HOSTS": hosts,
                                                      "JOB_COMPLETION_INDEX": str(i), "JAX_COORDINATOR_PORT": str(port)},
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True) for i in range(count)]
    one_job("".join(finish(procs)), count)
