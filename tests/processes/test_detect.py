"""Cluster detection (``framework/detect.py``) and ``flow.env.init``: what each system's variables say, checked
against the engines' own resolvers where they are installed (JAX's cluster detection, TensorFlow's
SlurmClusterResolver and TFConfigClusterResolver), and every mismatch refused by name.  No engine starts here."""
import json
import os
import subprocess
import sys

import pytest

import flowlayers as flow
from flowlayers.framework import cluster, detect

OMPI_URI = "1841561600.0;tcp://192.0.2.2:57477;tcp6://[fd00::2]:57231"


def srun(index, count=2, nodes="127.0.0.1", per_node=None, job=4242, local=None, node=0):
    """The variables ``srun`` sets in task ``index`` of a step of ``count`` tasks."""
    per_node = per_node or str(count)
    return {"SLURM_JOB_ID": str(job), "SLURM_JOBID": str(job), "SLURM_STEP_ID": "0", "SLURM_NTASKS": str(count),
            "SLURM_NPROCS": str(count), "SLURM_STEP_NUM_TASKS": str(count), "SLURM_STEP_NODELIST": nodes,
            "SLURM_NODELIST": nodes, "SLURM_STEP_TASKS_PER_NODE": per_node, "SLURM_TASKS_PER_NODE": per_node,
            "SLURM_PROCID": str(index), "SLURM_LOCALID": str(index if local is None else local),
            "SLURM_NODEID": str(node)}


def mpirun(rank, size=2, local_size=None):
    return {"OMPI_COMM_WORLD_SIZE": str(size), "OMPI_COMM_WORLD_RANK": str(rank),
            "OMPI_COMM_WORLD_LOCAL_RANK": str(rank), "OMPI_COMM_WORLD_LOCAL_SIZE": str(local_size or size),
            "OMPI_MCA_orte_hnp_uri": OMPI_URI}


def tf_config(index, workers=2, kind="worker", chief=0):
    cluster_spec = {"worker": [f"127.0.0.1:{7001 + i}" for i in range(workers)]}
    if chief:
        cluster_spec["chief"] = ["127.0.0.1:7000"]
    return {"TF_CONFIG": json.dumps({"cluster": cluster_spec, "task": {"type": kind, "index": index}})}


def test_slurm_host_lists_expand_as_tensorflows_resolver_expands_them():
    cases = ["node[1-3,5],gpu07", "n[01-03]", "127.0.0.1", "a,b[8-10],c[1,3]"]
    got = [detect.hostlist(c) for c in cases]
    assert got[0] == ["node1", "node2", "node3", "node5", "gpu07"] and got[1] == ["n01", "n02", "n03"]
    assert detect.tasks_per_node("3(x2),2,1") == [3, 3, 2, 1]
    tf = pytest.importorskip("tensorflow.python.distribute.cluster_resolver.slurm_cluster_resolver")
    assert got == [tf.expand_hostlist(c) for c in cases]
    assert detect.tasks_per_node("3(x2),2,1") == tf.expand_tasks_per_node("3(x2),2,1")


@pytest.mark.parametrize("text", ["node[1-3", "node1-3]", "n[3-1]", "n[a-b]", "a,,b"])
def test_a_malformed_host_list_is_named(text):
    with pytest.raises(flow.ConfigError, match=r"SLURM: expected .*node\[1-3,5\]|SLURM: expected ranges"):
        detect.hostlist(text)


def test_a_slurm_step_over_two_nodes():
    d = detect.detect(srun(3, count=4, nodes="node[1-2]", per_node="2(x2)", job=1234, local=1, node=1))
    assert (d.system, d.index, d.count, d.hosts) == ("SLURM", 3, 4, ("node1", "node2"))
    assert d.coordinator == "node1:62674"                   # 61440 + 1234 % 4096, on the first node
    assert d.addresses == ("node1:62675", "node1:62676", "node2:62675", "node2:62676")
    assert d.cluster() == flow.contract.Cluster(3, 4, d.coordinator, d.addresses, d.hosts)


def test_the_coordinator_is_where_jax_finds_it(monkeypatch):
    pytest.importorskip("jax")
    from jax._src.clusters import OmpiCluster, SlurmCluster

    for environ, jax_cluster in ((srun(1, count=4, nodes="node[001-002],x", per_node="2,1,1", job=99999,
                                       local=1), SlurmCluster),
                                 (mpirun(1), OmpiCluster)):
        monkeypatch.setattr(os, "environ", dict(environ))
        mine = detect.detect(environ)
        assert jax_cluster.is_env_present()
        assert mine.coordinator == jax_cluster.get_coordinator_address(None, None)
        assert (mine.count, mine.index) == (jax_cluster.get_process_count(), jax_cluster.get_process_id())
        monkeypatch.setattr(os, "environ", dict(environ, JAX_COORDINATOR_PORT="23456"))
        assert detect.detect(os.environ).coordinator == jax_cluster.get_coordinator_address(None, "23456")


def test_tf_config_gives_the_processes_tensorflow_reads_from_it(monkeypatch):
    environ = tf_config(1, workers=2, chief=1)
    d = detect.detect(environ)
    assert (d.system, d.index, d.count) == ("TF_CONFIG", 2, 3)
    assert d.addresses == ("127.0.0.1:7000", "127.0.0.1:7001", "127.0.0.1:7002")
    assert d.coordinator == "127.0.0.1:7000" and d.hosts == ("127.0.0.1",)
    resolver = pytest.importorskip("tensorflow.python.distribute.cluster_resolver.tfconfig_cluster_resolver")
    monkeypatch.setenv("TF_CONFIG", environ["TF_CONFIG"])
    spec = resolver.TFConfigClusterResolver().cluster_spec().as_dict()
    assert list(d.addresses) == spec["chief"] + spec["worker"]


def test_an_open_mpi_job_and_a_kubernetes_indexed_job():
    d = detect.detect(mpirun(1))
    assert (d.system, d.index, d.count, d.coordinator) == ("Open MPI", 1, 2, "192.0.2.2:64576")
    assert d.addresses == ("192.0.2.2:64577", "192.0.2.2:64578")
    several = detect.detect(mpirun(1, size=4, local_size=2))
    assert several.addresses == () and several.count == 4         # which node holds which rank: not said
    k8s = detect.detect({"JOB_COMPLETION_INDEX": "1", cluster.HOSTS: "train-0.train,train-1.train"})
    assert (k8s.system, k8s.index, k8s.count, k8s.coordinator) == ("Kubernetes", 1, 2, "train-0.train:55527")
    assert k8s.addresses == ("train-0.train:55528", "train-1.train:55529")
    with pytest.raises(flow.ConfigError, match=r"Kubernetes \(JOB_COMPLETION_INDEX=1\): expected \$FLOWLAYERS_HOSTS"):
        detect.detect({"JOB_COMPLETION_INDEX": "1"})
    with pytest.raises(flow.ConfigError, match=r"Open MPI: expected OMPI_MCA_orte_hnp_uri"):
        detect.detect({**mpirun(0), "OMPI_MCA_orte_hnp_uri": ""})
    assert detect.detect({**mpirun(0), "OMPI_MCA_orte_hnp_uri": ""}, coordinator="h:9").coordinator == "h:9"


def test_the_launcher_comes_first_and_nothing_is_one_process():
    launched = {cluster.INDEX: "1", cluster.COUNT: "4", cluster.COORDINATOR: "h:7000",
                cluster.ADDRESSES: ",".join(f"h:{7001 + i}" for i in range(4))}
    d = detect.detect({**launched, **srun(0, count=2)})     # a launcher inside an allocation: its own processes
    assert (d.system, d.index, d.count) == (detect.LAUNCHER, 1, 4)
    assert detect.detect({}) is None and detect.detect({"TF_CONFIG": "{}"}) is None
    assert detect.detect(srun(0, count=1)).cluster() is None         # one task: no Cluster, still SLURM's


@pytest.mark.parametrize("environ, message", [
    ({**srun(0), **tf_config(0, workers=3)}, r"SLURM and TF_CONFIG describe different jobs: .* received 2 process"
                                             r"\(es\), this one 0 .* and 3, this one 0"),
    ({**srun(1), **mpirun(0)}, r"SLURM and Open MPI describe different jobs"),
    (srun(2), r"SLURM: expected a process index 0..1 of 2 process\(es\), received index 2"),
    (mpirun(5), r"Open MPI: expected a process index 0..1 of 2 process\(es\), received index 5"),
    ({"JOB_COMPLETION_INDEX": "2", cluster.HOSTS: "a,b"}, r"Kubernetes: expected a process index 0..1"),
    (tf_config(2), r"TF_CONFIG: expected a task index 0..1 of the 2 worker task\(s\), received 2"),
    (tf_config(0, kind="ps"), r"TF_CONFIG: expected a task of type 'chief' or 'worker'"),
    ({"TF_CONFIG": '{"cluster": {"ps": ["a:1"], "worker": ["b:2"]}}'}, r"no 'ps' or 'evaluator'"),
    ({"TF_CONFIG": "{not json"}, r"TF_CONFIG: expected JSON"),
    ({**srun(0), "SLURM_PROCID": "x"}, r"SLURM: expected SLURM_PROCID to be an integer >= 0, received 'x'"),
    (srun(1, count=2, nodes="a,b", per_node="1(x2)", local=0, node=0), r"expected task 1 to be task 0 of node 'b'"),
    (srun(0, count=3, nodes="a,b", per_node="2"), r"expected SLURM_STEP_TASKS_PER_NODE to give the tasks of each"),
    ({**srun(0), "JAX_COORDINATOR_PORT": "0"}, r"expected JAX_COORDINATOR_PORT to be an integer >= 1"),
])
def test_a_job_described_two_ways_or_out_of_range_is_refused_by_name(environ, message):
    with pytest.raises(flow.ConfigError, match=message):
        detect.detect(environ)


def test_ports_past_65535_go_round_to_the_top_4096():
    assert detect.port_after(65534, 1) == 65535 and detect.port_after(65535, 1) == 61440
    assert detect.derived_port(4096 + 7) == 61447


@pytest.fixture
def fresh_env(monkeypatch):
    """This test process as one not yet read: flow.env reads its job anew, from a clean environment."""
    prefixes = ("SLURM_", "OMPI_", "JAX_COORDINATOR", "FLOWLAYERS_PROCESS")
    names = [n for n in os.environ if n.startswith(prefixes)] + ["TF_CONFIG", "JOB_COMPLETION_INDEX",
                                                                 "CUDA_VISIBLE_DEVICES"]
    for name in names:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setitem(flow.env._state, "cluster", False)
    monkeypatch.setitem(flow.env._state, "detected", None)


def test_init_gives_what_no_system_says(fresh_env, monkeypatch, capsys):
    flow.env.init(coordinator_address="10.0.0.1:5000", process_count=2, process_index=0)
    c = flow.env.cluster()
    assert (c.index, c.count, c.coordinator, c.addresses) == (0, 2, "10.0.0.1:5000",
                                                               ("10.0.0.1:5001", "10.0.0.1:5002"))
    assert "flowlayers: flow.env.init (process_count=2, process_index=0): process 0 of 2" in capsys.readouterr().err
    with pytest.raises(flow.ConfigError, match=r"expected to be called before this process's job was first read"):
        flow.env.init(process_count=2)
    assert flow.env.process_count() == 2           # the refused call changed nothing


def test_init_fills_in_a_detected_system_and_must_agree_with_it(fresh_env, monkeypatch):
    for k, v in srun(1).items():
        monkeypatch.setenv(k, v)
    with pytest.raises(flow.ConfigError, match=r"expected process_count=2, as SLURM started this process .* received "
                                               r"process_count=3"):
        flow.env.init(process_count=3)
    with pytest.raises(flow.ConfigError, match=r"expected process_index=1, as SLURM"):
        flow.env.init(process_index=0)
    flow.env.init(coordinator_address="127.0.0.1:40000", local_device_ids=[1])
    c = flow.env.cluster()
    assert (c.index, c.count, c.coordinator) == (1, 2, "127.0.0.1:40000")
    assert c.addresses == ("127.0.0.1:40001", "127.0.0.1:40002")       # the servers follow the coordinator
    assert os.environ["CUDA_VISIBLE_DEVICES"] == "1" and flow.env.started_by() == "SLURM"


@pytest.mark.parametrize("kwargs, message", [
    ({"process_count": 2}, r"expected coordinator_address and process_index with process_count=2"),
    ({"process_index": 1}, r"expected process_count with process_index or coordinator_address"),
    ({"process_count": 2, "process_index": 2, "coordinator_address": "h:1"}, r"expected a process index 0..1"),
    ({"process_count": 0}, r"process_count expected an integer >= 1, received 0"),
    ({"process_count": True}, r"process_count expected an integer >= 1, received True"),
    ({"coordinator_address": "h"}, r"coordinator_address: expected HOST:PORT"),
    ({"coordinator_address": 5}, r"coordinator_address expected 'host:port', received 5"),
    ({"process_count": 1, "coordinator_address": "h:1"}, r"expected no coordinator_address .* for process_count=1"),
    ({"local_device_ids": [0, 0]}, r"local_device_ids expected distinct device ids >= 0"),
    ({"local_device_ids": "0"}, r"local_device_ids expected distinct device ids >= 0"),
])
def test_init_arguments_are_checked_by_name(fresh_env, kwargs, message):
    with pytest.raises(flow.ConfigError, match=message):
        flow.env.init(**kwargs)
    assert flow.env._state["cluster"] is False        # nothing was fixed: a corrected call still works
    flow.env.init()
    assert flow.env.cluster() is None


def test_local_device_ids_pick_among_the_visible_devices(fresh_env, monkeypatch):
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "4,5,6,7")
    with pytest.raises(flow.ConfigError, match=r"ids among the 4 device\(s\) visible now"):
        flow.env.init(local_device_ids=[4])
    flow.env.init(local_device_ids=(3, 1))
    assert os.environ["CUDA_VISIBLE_DEVICES"] == "7,5"


def test_oneflow_machine_is_checked_against_the_detected_hosts(fresh_env, monkeypatch):
    for k, v in srun(0, count=4, nodes="n[1-2]", per_node="2(x2)").items():
        monkeypatch.setenv(k, v)
    monkeypatch.setattr(flow.engine, "join_processes", lambda view: None)
    flow.env.machine([{"addr": "n1"}, {"addr": "n2"}])
    with pytest.raises(flow.ConfigError, match=r"expected the hosts this job was launched on, \['n1', 'n2'\], "
                                               r"received \['n2', 'n1'\]; name the hosts SLURM gave the job"):
        flow.env.machine("n2", "n1")


@pytest.mark.slow
def test_process_0_says_in_one_line_what_started_the_job(tmp_path):
    """A plain ``python`` process given srun's variables: it is process 1 of 2 (no engine starts)."""
    code = "import flowlayers as flow; print(flow.env.process_index(), flow.env.process_count())"
    outs = []
    for i in range(2):
        env = {k: v for k, v in os.environ.items() if not k.startswith(("FLOWLAYERS_PROCESS", "SLURM_"))}
        r = subprocess.run([sys.executable, "-c", code], env={**env, **srun(i)}, capture_output=True, text=True,
                           timeout=120)
        assert r.returncode == 0, r.stderr
        outs.append(r)
    assert [r.stdout.split() for r in outs] == [["0", "2"], ["1", "2"]]
    said = [line for line in outs[0].stderr.splitlines() if line.startswith("flowlayers: ")]
    assert said == ["flowlayers: SLURM (job 4242, SLURM_STEP_NUM_TASKS=2, SLURM_PROCID=0): process 0 of 2, "
                    "coordinator 127.0.0.1:61586"]
    assert "flowlayers: " not in outs[1].stderr


def test_tensorflow_refuses_a_job_whose_process_addresses_are_unknown():
    """mpirun over several nodes does not say which node holds which rank: TF's servers cannot be addressed."""
    devices = pytest.importorskip("flowlayers_tensorflow.devices")
    several = detect.detect(mpirun(1, size=4, local_size=2)).cluster()
    with pytest.raises(flow.ConfigError, match=r"DTensor multi-client \('consistent' view, process 1 of 4\): expected "
                                               r"the address of every process's server, received 0"):
        devices.join("consistent", several, 1)
