"""The launcher's watch, piece by piece and without processes: the heartbeat record, which process a stalled job
waits on, the guard's list of groups, the checked flags and ports.  End to end: ``test_watch.py``."""
import math
import os
import socket
import stat

import pytest

import flowlayers as flow
from flowlayers import launch, launch_guard
from flowlayers.framework import cluster
from flowlayers.launch_watch import Progress, Watch, read


@pytest.fixture
def heart(tmp_path, monkeypatch):
    """This process as the launcher's process 0 sees it: its heartbeat file, not written yet."""
    path = tmp_path / "process-0"
    monkeypatch.setenv(cluster.HEARTBEAT, str(path))
    monkeypatch.setitem(flow.env._state, "heart", None)
    return path


def test_a_heartbeat_records_the_stages_and_steps_begun(heart):
    assert read(heart) is None                       # nothing yet
    flow.env.heartbeat(steps=0)                      # a program compiled
    assert read(heart) == Progress(beats=1, steps=0, stepping=False)
    flow.env.heartbeat()
    assert read(heart) == Progress(beats=2, steps=1, stepping=True)
    flow.env.heartbeat(4)                            # a group of 4 steps
    assert read(heart) == Progress(beats=3, steps=5, stepping=True)
    assert heart.stat().st_size == cluster.HEARTBEAT_RECORD.size      # rewritten in place
    assert stat.S_IMODE(heart.stat().st_mode) == 0o600                # this user's only
    opened = [fd for fd in os.listdir("/proc/self/fd")
              if os.path.realpath(f"/proc/self/fd/{fd}") == os.path.realpath(heart)]
    assert len(opened) == 1                                          # the map's own, no other


def test_without_the_launcher_a_heartbeat_writes_nothing(tmp_path, monkeypatch):
    monkeypatch.delenv(cluster.HEARTBEAT, raising=False)
    monkeypatch.setitem(flow.env._state, "heart", None)
    monkeypatch.chdir(tmp_path)
    flow.env.heartbeat()
    assert flow.env._state["heart"] is False and os.listdir(tmp_path) == []


def test_a_record_read_while_written_or_cut_short_is_not_taken(tmp_path):
    path = tmp_path / "process-0"
    path.write_bytes(cluster.HEARTBEAT_RECORD.pack(7, 6, 1, 6))      # the new count at one end only
    assert read(path) is None
    path.write_bytes(cluster.HEARTBEAT_RECORD.pack(7, 6, 1, 7)[:-1])
    assert read(path) is None
    path.write_bytes(cluster.HEARTBEAT_RECORD.pack(7, 6, 1, 7) + b"x")
    assert read(path) is None
    path.write_bytes(cluster.HEARTBEAT_RECORD.pack(7, 6, 1, 7))
    assert read(path) == Progress(7, 6, True)


def test_where_a_process_was_last_seen():
    assert Progress().where() == "starting, before its first step"
    assert Progress(1, 0, False).where() == "compiling, before its first step"
    assert Progress(3, 2, True).where() == "at step 2"
    assert Progress(4, 2, False).where() == "compiling, after step 2"


def beat(path, beats, steps):
    path.write_bytes(cluster.HEARTBEAT_RECORD.pack(beats, steps, steps > 0, beats))


def test_the_process_waited_on_has_begun_the_fewest_stages_then_is_silent_longest(tmp_path):
    paths = [tmp_path / f"process-{i}" for i in range(3)]
    watch = Watch(paths, now=100.0)
    assert watch.stalled([0, 1, 2], 105.0, timeout=5) is None        # silent since their start, for 5 s only
    assert watch.stalled([0, 1, 2], 105.5, timeout=5) == 0           # a tie of three: the first silent longest
    beat(paths[0], 2, 1)
    beat(paths[2], 2, 1)
    watch.look(101.0)
    assert watch.seen[0].since == 101.0 and watch.seen[1].since == 100.0
    assert watch.stalled([0, 1, 2], 105.5, timeout=5) == 1           # never began a stage: judged from its start
    beat(paths[1], 1, 0)
    watch.look(102.0)
    beat(paths[2], 3, 2)                                             # process 2 begins step 2 and waits in it
    watch.look(103.0)
    watch.look(200.0)                                                # no new stage: nothing changes
    assert [p.since for p in watch.seen] == [101.0, 102.0, 103.0]
    assert watch.waited_on([0, 1, 2]) == 1                           # fewest stages, though not silent longest
    assert watch.stalled([0, 1, 2], 107.0, timeout=5) is None
    assert watch.stalled([0, 1, 2], 107.5, timeout=5) == 1
    assert watch.stalled([0, 2], 107.5, timeout=5) == 0              # of those still running
    assert watch.stalled([], 107.5, timeout=5) is None
    assert watch.report(1, [0, 1, 2], [4, 5, 6]) == ("it was compiling, before its first step, while process 4 was "
                                                      "at step 1, process 6 was at step 2")
    assert watch.report(0, [0], [4, 5, 6]) == "it was at step 1"


def test_a_stage_count_going_back_is_not_progress(tmp_path):
    path = tmp_path / "process-0"
    watch = Watch([path], now=0.0)
    beat(path, 3, 2)
    watch.look(1.0)
    beat(path, 3, 3)
    watch.look(2.0)
    beat(path, 2, 1)
    watch.look(3.0)
    assert (watch.seen[0].beats, watch.seen[0].since) == (3, 1.0)


def test_the_guard_keeps_the_groups_named_and_not_taken_back():
    read_end, write_end = os.pipe()
    for chunk in (b"+15\n+1", b"6\n-15\n+17", b"\n-99\n"):           # lines cut across writes
        os.write(write_end, chunk)
    os.close(write_end)
    try:
        assert launch_guard.groups(read_end) == {16, 17}
    finally:
        os.close(read_end)


@pytest.mark.parametrize("flag", ["--timeout", "--grace-period"])
@pytest.mark.parametrize("value", ["-1", "nan", "inf", "-inf"])
def test_seconds_are_finite_and_not_negative(flag, value, capsys):
    with pytest.raises(SystemExit) as e:
        launch.parse([f"{flag}={value}", "x.py"])
    assert e.value.code == 2
    assert f"{flag}: expected a finite number of seconds >= 0, received {float(value)}" in capsys.readouterr().err


def test_zero_seconds_are_accepted():
    a, _ = launch.parse(["--timeout", "0", "--grace-period", "0", "x.py"])
    assert (a.timeout, a.grace_period) == (0, 0)
    a, _ = launch.parse(["x.py"])
    assert (a.timeout, a.grace_period) == (300, launch.GRACE_SECONDS) and not math.isnan(a.timeout)


@pytest.mark.parametrize("port", ["0", "65534"])
def test_the_coordinator_port_leaves_room_for_the_processes_ports(port, capsys):
    with pytest.raises(SystemExit):
        launch.parse(["--processes", "2", "--coordinator", f"h:{port}", "x.py"])
    assert f"--coordinator: expected a port 1..65533 (the 2 processes listen on the ports after it), received " \
           f"'h:{port}'" in capsys.readouterr().err
    launch.parse(["--processes", "2", "--coordinator", "h:65533", "x.py"])
    launch.parse(["--processes", "2", "--coordinator", "h:1", "x.py"])


def test_this_hosts_ports_and_those_in_use():
    a, hosts = launch.parse(["--hosts", "h0,h1", "--host-index", "1", "--coordinator", "h0:7000", "--processes", "2",
                             "x.py"])
    envs = launch.environments(a, hosts)
    assert launch.local_ports(a, envs) == [(7003, "process 2's server"), (7004, "process 3's server")]
    a.host_index = 0
    envs = launch.environments(a, hosts)
    assert launch.local_ports(a, envs) == [(7000, "process 0's coordinator"), (7001, "process 0's server"),
                                           (7002, "process 1's server")]
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]
        free = launch.free_ports(1)[0]
        assert launch.unbindable([(free, "a"), (port, "b")]) == [(port, "b", "Address already in use")]
        a, hosts = launch.parse(["--processes", "1", "--coordinator", f"127.0.0.1:{port - 1}", "x.py"])
        with pytest.raises(flow.ConfigError, match=rf"--coordinator 127.0.0.1:{port - 1}: expected ports this host's "
                                                   rf"processes can listen on, received port {port} \(process 0's "
                                                   rf"server\): Address already in use; choose another"):
            launch.check_ports(a, launch.environments(a, hosts))
