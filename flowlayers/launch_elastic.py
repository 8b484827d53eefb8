"""Elastic membership across hosts (``--elastic MIN:MAX``): the launchers agree on which hosts run the job.

Every host runs the launcher with the same ``--hosts`` and ``--coordinator``, as without ``--elastic``.  The
launcher of the first host also serves a small rendezvous, a TCP service on the port after the processes' ports
(``rendezvous_port``), and every launcher (the first one too) keeps one connection to it.  The rendezvous decides,
and the launchers follow:

- **start**: the job starts on the hosts joined (at most MAX) once every host of ``--hosts`` has, or, after
  ``--join-timeout`` seconds, on those there are if at least MIN; each start numbers the processes anew, host by
  host (``launch_job.member_environments``);
- **stop**: when a member's launcher is gone (its connection closes: killed; or it is silent ``LOST_SECONDS``: its
  machine lost) or reports a failure (a process failed or hung), every member stops its processes, and the job
  starts again with the launchers still there, if at least MIN; such restarts count against ``--max-restarts``;
- **restart point**: a launcher that joins while the job runs waits; the members are asked to stop at the next
  backup (``flow.env.restart_point``: the processes exit once ``BackupAndRestore`` has written it), and the job
  starts again with the newcomer.  Without ``BackupAndRestore`` there is no such point, and it waits for the end.

Each start resumes from the last backup, and with the same global batch data-parallel training gives the same
weights whatever the process count.  Why a TCP service and not files on a shared file system: a closed connection
tells at once that a launcher is gone, where files would need clocks that agree and timeouts; the service needs
no file system beyond the backup's.  The cost: the first host must stay (without it the rendezvous is gone and the
others stop, naming it).  Every wait is bounded: by ``--join-timeout`` for a start, by ``--grace-period`` plus
``STOP_MARGIN`` for a stop, and by ``LOST_SECONDS`` of silence from either side.
"""
import functools
import json
import os
import selectors
import socket
import threading
import time

from .launch_job import attempt, member_environments

JOIN_SECONDS = 60.0     # --join-timeout's default
BEAT_SECONDS = 1.0      # each side says it is alive this often
LOST_SECONDS = 15.0     # silent this long: gone (a machine lost; a killed launcher's connection closes at once)
STOP_MARGIN = 30.0      # beyond --grace-period, how long a stop may take before a member is given up
TICK = 0.1              # how often the rendezvous looks at its state


def rendezvous_port(a, hosts):
    """The rendezvous's port on the first host: the one after every process's (``hosts``: their number)."""
    return int(a.coordinator.rsplit(":", 1)[1]) + 1 + a.processes * hosts


def run(a, hosts, host, folder):
    """This host's launcher under ``--elastic``: the job's starts as the rendezvous orders them; the exit code."""
    address = (hosts[0], rendezvous_port(a, len(hosts)))
    server = Rendezvous(a, hosts, address[1]) if a.host_index == 0 else None
    if server:
        server.start()
    try:
        client = Member(address, a.host_index, a.join_timeout + LOST_SECONDS)
    except ConnectionError as e:
        host.say(str(e))
        return 1
    try:
        return _follow(a, hosts, host, folder, client)
    finally:
        client.close()
        if server:
            server.finish()


def _follow(a, hosts, host, folder, client):
    while True:
        order = client.order(host)
        if order["kind"] == "finished":
            return 0
        if order["kind"] in ("give_up", "gone"):
            host.say(order["why"])
            return 1
        if order["kind"] == "signal":
            return 128 + order["signum"]
        g, members = order["generation"], order["members"]
        host.say(f"starting the job on host(s) {members} of --hosts ({len(members) * a.processes} processes)"
                 + (f" after: {order['why']}" if order["why"] else "")
                 + (f" ({order['restarts']} of --max-restarts {a.max_restarts} used)" if order["restarts"] else ""))
        where = os.path.join(folder, f"start-{g}")
        point = os.path.join(where, "restart-point")
        end = attempt(a, member_environments(a, hosts, members), host, where,
                      outside=functools.partial(client.outside, point), restart_point=point)
        if end.kind != "done":
            host.say(end.message)
        if end.kind == "signal":
            return end.code
        client.tell({"ended": g, "kind": end.kind, "why": f"host {a.host_index}: {end.message}"})


class Member:
    """A launcher's connection to the rendezvous: it joins, beats, and reads the orders."""

    def __init__(self, address, index, patience):
        self.address, self.index, self.lock = address, index, threading.Lock()
        self.sock = _connect(address, patience)
        self.sock.settimeout(TICK)
        self.heard, self.buffer, self.closed = time.monotonic(), b"", False
        self.last = None        # an end (give_up, gone) read during a start, for the next ``order``
        self.tell({"join": index})
        self.beating = threading.Thread(target=self._beat, daemon=True)
        self.beating.start()

    def tell(self, message):
        with self.lock:
            try:
                self.sock.sendall(json.dumps(message).encode() + b"\n")
            except OSError:
                pass        # the rendezvous is gone: the next read says so

    def _beat(self):
        while not self.closed:
            self.tell({"beat": self.index})
            time.sleep(BEAT_SECONDS)

    def read(self):
        """The next message, None where none came within a tick, or a "gone" message."""
        while b"\n" not in self.buffer:
            if time.monotonic() - self.heard > LOST_SECONDS:
                return self._gone(f"silent for {LOST_SECONDS:g} s")
            try:
                chunk = self.sock.recv(65536)
            except socket.timeout:
                return None
            except OSError as e:
                return self._gone(str(e))
            if not chunk:
                return self._gone("its connection closed")
            self.heard, self.buffer = time.monotonic(), self.buffer + chunk
        line, self.buffer = self.buffer.split(b"\n", 1)
        message = json.loads(line)
        return None if "beat" in message else message

    def _gone(self, why):
        return {"kind": "gone", "why": f"the rendezvous of the hosts' launchers at {self.address[0]}:"
                                       f"{self.address[1]} (the first host's launcher) is gone: {why}"}

    def order(self, host):
        """Wait for the next start, or the end: a message with ``kind`` start, finished, give_up, gone or signal
        (bounded: the rendezvous beats, and is given up after ``LOST_SECONDS`` of silence)."""
        while True:
            if host.received:
                return {"kind": "signal", "signum": host.received[0]}
            message, self.last = self.last or self.read(), None
            if message and message["kind"] in ("start", "finished", "give_up", "gone"):
                return message

    def outside(self, point):
        """During a start: a reason to stop now (the rendezvous says so, or is gone), else None; a request for a
        restart point creates the file ``point`` the processes look for."""
        message = self.read()
        if message is None:
            return None
        if message["kind"] == "restart_point":
            with open(point, "w"):
                pass
            return None
        if message["kind"] in ("gone", "give_up"):
            self.last = message
        return message["why"] if message["kind"] in ("stop", "gone", "give_up") else None

    def close(self):
        self.closed = True
        with self.lock:
            self.sock.close()


def _connect(address, patience):
    """A connection to ``address``, tried until ``patience`` seconds have passed."""
    deadline, error = time.monotonic() + patience, None
    while time.monotonic() < deadline:
        try:
            return socket.create_connection(address, timeout=5)
        except OSError as e:
            error = e
            time.sleep(0.2)
    raise ConnectionError(f"--elastic: expected the rendezvous of the hosts' launchers at {address[0]}:{address[1]} "
                          f"(the first host's launcher) within {patience:g} s, received {error!r}")


class Rendezvous(threading.Thread):
    """The first host's service: who is in the job, and when it starts and stops (see the module's text)."""

    def __init__(self, a, hosts, port):
        super().__init__(daemon=True)
        self.low, self.high = a.elastic
        self.wanted = min(self.high, len(hosts))
        self.join_timeout, self.max_restarts = a.join_timeout, a.max_restarts
        self.stop_within = a.grace_period + STOP_MARGIN
        self.listener = socket.create_server(("", port), reuse_port=False)
        self.listener.setblocking(False)
        self.select = selectors.DefaultSelector()
        self.select.register(self.listener, selectors.EVENT_READ)
        self.conns = {}             # socket -> [host index or None, buffer, last heard]
        self.generation, self.members, self.ended, self.restarts = 0, {}, {}, 0     # members: host -> socket
        self.phase, self.since, self.first, self.why, self.asked = "forming", time.monotonic(), True, "", False
        self.done = threading.Event()

    def finish(self):
        self.done.set()
        self.join(timeout=5)

    def run(self):
        last_beat = 0.0
        while not self.done.is_set():
            for key, _ in self.select.select(TICK):
                self._accept() if key.fileobj is self.listener else self._receive(key.fileobj)
            now = time.monotonic()
            for sock in [s for s, c in self.conns.items() if now - c[2] > LOST_SECONDS]:
                self._drop(sock)
            if now - last_beat > BEAT_SECONDS:
                self._broadcast({"beat": 0}, self.conns)
                last_beat = now
            getattr(self, f"_{self.phase}")(now)
        for sock in list(self.conns):
            self._drop(sock)
        self.listener.close()

    # connections -------------------------------------------------------------------------------------------

    def _accept(self):
        try:
            sock, _ = self.listener.accept()
        except OSError:
            return
        sock.setblocking(False)
        self.conns[sock] = [None, b"", time.monotonic()]
        self.select.register(sock, selectors.EVENT_READ)

    def _receive(self, sock):
        try:
            chunk = sock.recv(65536)
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            chunk = b""
        if not chunk:
            return self._drop(sock)
        conn = self.conns[sock]
        conn[1], conn[2] = conn[1] + chunk, time.monotonic()
        while b"\n" in conn[1] and sock in self.conns:
            line, conn[1] = conn[1].split(b"\n", 1)
            try:
                message = json.loads(line)
            except ValueError:
                return self._drop(sock)       # not one of the launchers
            self._message(sock, message)

    def _message(self, sock, message):
        if "join" in message:
            for other in [s for s, c in self.conns.items() if c[0] == message["join"] and s is not sock]:
                self._drop(other)       # the same host again: its old launcher is gone
            self.conns[sock][0] = message["join"]
        elif "ended" in message and message["ended"] == self.generation and \
                self.members.get(self.conns[sock][0]) is sock:
            self.ended[self.conns[sock][0]] = (message["kind"], message["why"])

    def _drop(self, sock):
        if sock not in self.conns:
            return
        self.select.unregister(sock)
        self.conns.pop(sock, None)
        sock.close()

    def _send(self, sock, message):
        try:
            sock.sendall(json.dumps(message).encode() + b"\n")     # small: the socket's buffer takes it at once
        except (BlockingIOError, OSError):
            self._drop(sock)

    def _broadcast(self, message, socks):
        for sock in list(socks):
            if sock in self.conns:
                self._send(sock, message)

    def _joined(self):
        return sorted({c[0] for c in self.conns.values() if c[0] is not None})

    def _present(self):
        """The members whose launcher of this start is still connected."""
        return [h for h, sock in self.members.items() if sock in self.conns]

    # phases ------------------------------------------------------------------------------------------------

    def _forming(self, now):
        joined = self._joined()
        waited = now - self.since >= self.join_timeout
        if len(joined) >= self.wanted or (len(joined) >= self.low and (waited or not self.first)):
            self.generation += 1
            self.members = {h: next(s for s, c in self.conns.items() if c[0] == h) for h in joined[:self.high]}
            self.ended, self.asked, self.first, self.phase = {}, False, False, "running"
            self._broadcast({"kind": "start", "generation": self.generation, "members": sorted(self.members),
                             "restarts": self.restarts, "why": self.why}, self.members.values())
        elif waited:
            self._give_up(f"expected at least {self.low} host(s) (--elastic {self.low}:{self.high}) within "
                          f"--join-timeout {self.join_timeout:g} s, received {len(joined)}: {joined}"
                          + (f", after {self.why}" if self.why else ""))

    def _running(self, now):
        present = self._present()
        gone = [h for h in self.members if h not in present]
        failed = [(h, why) for h, (kind, why) in self.ended.items() if kind not in ("done", "planned")]
        if gone or failed:
            self._stopping_for(f"host {gone[0]}'s launcher is gone" if gone else failed[0][1], counts=True, now=now)
        elif any(kind == "planned" for kind, _ in self.ended.values()):
            self._stopping_for("a host joined at the restart point", counts=False, now=now)
        elif len(self.ended) == len(self.members):
            self._broadcast({"kind": "finished"}, self.conns)
            self.phase = "over"
        elif not self.asked and len(self.members) < self.high and \
                any(c[0] is not None and s not in self.members.values() for s, c in self.conns.items()):
            self.asked = True       # a launcher waits to join: stop at the next backup
            self._broadcast({"kind": "restart_point", "generation": self.generation}, self.members.values())

    def _stopping_for(self, why, counts, now):
        self.why, self.counts, self.since, self.phase = why, counts, now, "stopping"
        self._broadcast({"kind": "stop", "why": why}, [s for h, s in self.members.items() if h not in self.ended])

    def _stopping(self, now):
        waiting = [h for h in self._present() if h not in self.ended]
        if waiting and now - self.since < self.stop_within:
            return
        for h in waiting:       # did not stop in time: given up (it stops itself, naming the rendezvous)
            self._drop(self.members[h])
        if self.counts:
            self.restarts += 1
            if self.restarts > self.max_restarts:
                return self._give_up(f"{self.why}; --max-restarts {self.max_restarts} reached")
        self.phase, self.since = "forming", now

    def _give_up(self, why):
        self._broadcast({"kind": "give_up", "why": why}, self.conns)
        self.phase = "over"

    def _over(self, now):
        pass
