"""``python -m flowlayers.launch``: processes started, told their place, watched; no engine is needed here."""
import os
import signal
import subprocess
import sys
import textwrap
import time

import pytest

import flowlayers as flow
from flowlayers import launch
from flowlayers.framework import cluster


def script(tmp_path, body):
    path = tmp_path / "script.py"
    path.write_text(textwrap.dedent(body))
    return str(path)


def launched(*args, timeout=60):
    return subprocess.run([sys.executable, "-m", "flowlayers.launch", *args], capture_output=True, text=True,
                          timeout=timeout)


@pytest.mark.slow
def test_every_process_learns_its_place_and_gets_the_arguments_unchanged(tmp_path):
    path = script(tmp_path, """
        import sys, flowlayers as flow
        c = flow.env.cluster()
        print("place", flow.env.process_index(), flow.env.process_count(), c.coordinator, len(c.addresses), sys.argv[1:])
    """)
    r = launched("--processes", "3", path, "--view", "mirrored", "x y")
    assert r.returncode == 0, r.stdout + r.stderr
    lines = sorted(line for line in r.stdout.splitlines() if " place " in line)
    assert len(lines) == 3
    for i, line in enumerate(lines):
        assert line.startswith(f"[process {i}] place {i} 3 127.0.0.1:")
        assert line.endswith("3 ['--view', 'mirrored', 'x y']")
    ports = {line.split()[4] for line in lines}
    assert len(ports) == 1     # one coordinator for all


@pytest.mark.slow
def test_a_failing_process_is_named_and_the_others_are_stopped(tmp_path):
    path = script(tmp_path, """
        import sys, time, flowlayers as flow
        if flow.env.process_index() == 1:
            sys.exit(3)
        time.sleep(120)
    """)
    t0 = time.time()
    r = launched("--processes", "2", path)
    assert r.returncode == 3
    assert "flowlayers.launch: process 1 exited with code 3; stopped process(es) [0]" in r.stdout
    assert time.time() - t0 < 30


@pytest.mark.slow
def test_a_process_killed_by_sigkill_is_named_within_seconds(tmp_path):
    path = script(tmp_path, """
        import os, signal, time, flowlayers as flow
        if flow.env.process_index() == 1:
            time.sleep(0.5)
            os.kill(os.getpid(), signal.SIGKILL)
        time.sleep(120)
    """)
    t0 = time.time()
    r = launched("--processes", "2", path)
    assert r.returncode == 1
    assert "process 1 was killed by SIGKILL" in r.stdout
    assert time.time() - t0 < 30


@pytest.mark.slow
def test_a_silent_process_stops_the_job_naming_it(tmp_path):
    path = script(tmp_path, """
        import time, flowlayers as flow
        for _ in range(3):
            flow.env.heartbeat(); time.sleep(1.05)
        if flow.env.process_index() == 0:
            time.sleep(120)             # hangs
        while True:                     # keeps beating, as a peer would until it waits on the hung one
            flow.env.heartbeat(); time.sleep(0.2)
    """)
    r = launched("--processes", "2", "--timeout", "3", path)
    assert r.returncode == 1
    assert "process 0 made no progress for 3 s" in r.stdout


@pytest.mark.slow
def test_sigterm_to_the_launcher_reaches_every_process(tmp_path):
    path = script(tmp_path, """
        import signal, sys, time, flowlayers as flow
        signal.signal(signal.SIGTERM, lambda *a: (print("got SIGTERM", flush=True), sys.exit(143)))
        print("ready", flush=True)
        time.sleep(120)
    """)
    proc = subprocess.Popen([sys.executable, "-m", "flowlayers.launch", "--processes", "2", path],
                            stdout=subprocess.PIPE, text=True)
    ready = 0
    while ready < 2:
        ready += "ready" in proc.stdout.readline()
    proc.send_signal(signal.SIGTERM)
    out = proc.communicate(timeout=30)[0]
    assert proc.returncode == 143
    assert out.count("got SIGTERM") == 2


@pytest.mark.parametrize("args, message", [
    (["--processes", "0"], "--processes: expected at least 1, received 0"),
    (["--hosts", "a,b"], "--coordinator: expected HOST:PORT with several hosts"),
    (["--hosts", "a,b", "--host-index", "2", "--coordinator", "a:1"], "--host-index: expected 0..1"),
    (["--coordinator", "a"], "--coordinator: expected HOST:PORT, received 'a'"),
    (["--devices-per-process", "0"], "--devices-per-process: expected at least 1"),
])
@pytest.mark.slow
def test_launcher_arguments_are_checked(args, message):
    r = launched(*args, "x.py")
    assert r.returncode == 2 and message in r.stderr


def test_several_hosts_agree_on_every_address():
    a, hosts = launch.parse(["--hosts", "h0,h1", "--host-index", "1", "--coordinator", "h0:7000", "--processes", "2",
                             "--devices-per-process", "2", "s.py"])
    envs = launch.environments(a, hosts)
    assert [e[cluster.INDEX] for e in envs] == ["2", "3"]
    assert envs[0][cluster.ADDRESSES] == "h0:7001,h0:7002,h1:7003,h1:7004"
    assert envs[1][cluster.COUNT] == "4" and envs[1][cluster.COORDINATOR] == "h0:7000"
    assert envs[0]["FLOWLAYERS_CPU_DEVICES"] == "2"


def environment(index=0, count=2, hosts="127.0.0.1"):
    return {cluster.INDEX: str(index), cluster.COUNT: str(count), cluster.COORDINATOR: "h0:7000",
            cluster.ADDRESSES: ",".join(f"h:{7001 + i}" for i in range(count)), cluster.HOSTS: hosts}


def test_a_cluster_is_read_from_the_environment_and_damage_is_named():
    c = cluster.from_environment(environment(1, 2))
    assert (c.index, c.count, c.local(4), c.owns(2, 4), c.owns(1, 4)) == (1, 2, 2, True, False)
    assert cluster.from_environment({}) is None
    with pytest.raises(flow.ConfigError, match=r"expected 0 <= FLOWLAYERS_PROCESS_INDEX < FLOWLAYERS_PROCESS_COUNT"):
        cluster.from_environment(environment(2, 2))
    with pytest.raises(flow.ConfigError, match=r"FLOWLAYERS_PROCESS_COUNT \(ints\)"):
        cluster.from_environment({**environment(), cluster.COUNT: "two"})


def test_oneflow_machine_and_ports_are_checked_against_the_launch(monkeypatch):
    flow.env.machine([{"addr": "127.0.0.1"}])                 # one machine: this host
    flow.env.ctrl_port(9000)
    flow.env.data_port(9001)
    with pytest.raises(flow.ConfigError, match=r"flow.env.machine.*expected the hosts this job was launched on"):
        flow.env.machine("10.0.0.1", "10.0.0.2")
    with pytest.raises(flow.ConfigError, match=r"expected a port number 1..65535, received 0"):
        flow.env.ctrl_port(0)
    with pytest.raises(flow.ConfigError, match=r"expected host addresses"):
        flow.env.machine([{"host": "a"}])
    monkeypatch.setitem(flow.env._state, "cluster", cluster.from_environment(environment(0, 2, "h0,h1")))
    flow.env.machine([{"addr": "h0"}, {"addr": "h1"}])
    flow.env.ctrl_port(7000)
    with pytest.raises(flow.ConfigError, match=r"expected the coordinator port of this job's launcher \(h0:7000\)"):
        flow.env.ctrl_port(7001)
    assert (flow.env.process_index(), flow.env.process_count(), flow.env.is_multi_client()) == (0, 2, True)


def test_device_counts_are_per_process_and_the_mesh_spans_all(monkeypatch):
    monkeypatch.setitem(flow.env._state, "cluster", cluster.from_environment(environment(1, 2)))
    monkeypatch.setitem(flow.settings._state, "device_num", None)
    # this process is not one of a launched job: counting only, no joining of an engine's runtime (test_processes)
    monkeypatch.setattr(flow.engine, "join_processes", lambda view: None)
    assert flow.config.device_num() == 2                       # one device per process by default
    flow.config.gpu_device_num(2)
    assert flow.config.device_num() == 4 and flow.config.mesh_shape() == {"data": 4}
    flow.config.set_mesh(data=2, model=2)
    with pytest.raises(flow.ConfigError, match=r"expected a mesh whose device count is a multiple of the 2 processes"):
        flow.config.set_mesh(data=3)
    with pytest.raises(flow.ConfigError, match=r"gpu_device_num\(2\) in each of 2 processes\), received a mesh of 2"):
        flow.config.set_mesh(data=2)
    assert flow.config.mesh_shape() == {"data": 2, "model": 2}      # the refused settings changed nothing
    assert flow.config.placement().cluster.index == 1


def test_one_process_is_no_cluster_and_a_cluster_is_a_value():
    assert cluster.from_environment(environment(0, 1)) is None       # --processes 1: this process alone
    assert (flow.env.process_index(), flow.env.process_count(), flow.env.is_multi_client()) == (0, 1, False)
    c = cluster.from_environment(environment(1, 2))
    assert {c: "runtime"}[cluster.from_environment(environment(1, 2))] == "runtime"     # hashable, by value
    assert isinstance(c.local(4), int) and c.local(4) == 2
    with pytest.raises(AttributeError):
        c.index = 0


def test_ports_are_checked_at_their_bounds():
    flow.env.ctrl_port(65535)
    flow.env.data_port(1)
    for bad in (65536, True, "9000"):
        with pytest.raises(flow.ConfigError, match=r"expected a port number 1..65535"):
            flow.env.ctrl_port(bad)
        with pytest.raises(flow.ConfigError, match=r"expected a port number 1..65535"):
            flow.env.data_port(bad)
