"""The launcher's watch: how far each process of a job has come, and which one a stalled job waits on.

Every process passes the same stages in the same order: each program compiled, each step begun.  It counts them in
its heartbeat file (``env.heartbeat``; the record: ``cluster.HEARTBEAT_RECORD``), and the launcher reads the files
as it polls.  A process hung at some stage leaves its peers waiting in a collective of a later stage: they have
begun a stage it has not.  So the process the job waits on is the one with the fewest stages begun, and among
equals the one silent longest.  A process is silent from its start, so one that hangs before its first stage is
seen too: ``--timeout`` counts start-up and compiling as well as steps.
"""
from dataclasses import dataclass

from .framework import cluster


@dataclass
class Progress:
    beats: int = 0          # stages begun: programs compiled and steps
    steps: int = 0          # steps begun
    stepping: bool = False  # whether the last stage was a step (else a program being compiled)
    since: float = 0.0      # when the launcher saw the last stage begin (the process's start before any)

    def where(self):
        """Where the process was last seen, in words."""
        if not self.beats:
            return "starting, before its first step"
        if not self.steps:
            return "compiling, before its first step"
        return f"at step {self.steps}" if self.stepping else f"compiling, after step {self.steps}"


def read(path):
    """The record in heartbeat file ``path`` as a Progress (its ``since`` unset); None while there is none, or the
    one read was being written (its two stage counts differ)."""
    try:
        with open(path, "rb") as f:
            data = f.read()
    except FileNotFoundError:
        return None
    if len(data) != cluster.HEARTBEAT_RECORD.size:
        return None
    beats, steps, stepping, again = cluster.HEARTBEAT_RECORD.unpack(data)
    return Progress(beats, steps, bool(stepping)) if beats == again else None


class Watch:
    """The progress of the processes whose heartbeat files are ``paths``, all started by ``now``."""

    def __init__(self, paths, now):
        self.paths = list(paths)
        self.seen = [Progress(since=now) for _ in self.paths]

    def look(self, now):
        """Read every file; a process that began a new stage since the last look has made progress at ``now``."""
        for i, path in enumerate(self.paths):
            got = read(path)
            if got is not None and got.beats > self.seen[i].beats:
                got.since = now
                self.seen[i] = got

    def waited_on(self, running):
        """Of the processes ``running`` (indices), the one the others wait on: fewest stages begun, then silent
        longest."""
        return min(running, key=lambda i: (self.seen[i].beats, self.seen[i].since))

    def stalled(self, running, now, timeout):
        """The process the job waits on, if it has made no progress for over ``timeout`` seconds; else None."""
        if not running:
            return None
        i = self.waited_on(running)
        return i if now - self.seen[i].since > timeout else None

    def report(self, i, running, names):
        """Where process ``i`` and the other ``running`` processes were last seen; ``names[j]``: process j's
        number in the job."""
        others = [f"process {names[j]} was {self.seen[j].where()}" for j in running if j != i]
        return f"it was {self.seen[i].where()}" + (f", while {', '.join(others)}" if others else "")

