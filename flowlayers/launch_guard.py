"""The launcher's guard: no process of a job outlives its launcher, even a SIGKILLed one.

The launcher starts each process in a process group of its own, which that process's children (and theirs) join.
A launcher that is SIGKILLed runs no code, and the kernel's parent-death signal reaches its children only, so the
launcher (``Guard``) starts this file first as a program of its own, in a session of its own (beyond the signals
sent to the launcher's group or terminal)::

    python -I -S launch_guard.py FD

It reads lines ``+PGID`` (a group started) and ``-PGID`` (a group the launcher has stopped and collected) from the
pipe ``FD``, whose write end only the launcher holds.  When the pipe ends, the launcher is gone, however it went:
the guard SIGKILLs every group still named, and exits.  It imports nothing of flowlayers: it starts in
milliseconds.
"""
import os
import signal
import subprocess
import sys


class Guard:
    """The launcher's end: starts the guard, and tells it each process group the launcher starts and collects."""

    def __init__(self):
        read, self._write = os.pipe()
        self.proc = subprocess.Popen([sys.executable, "-I", "-S", os.path.abspath(__file__), str(read)],
                                     pass_fds=(read,), stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                     start_new_session=True)
        os.close(read)

    def started(self, pgid):
        self._tell(f"+{pgid}")

    def collected(self, pgid):
        """The group ``pgid`` is stopped and its leader's exit collected: its id may name another group soon."""
        self._tell(f"-{pgid}")

    def _tell(self, line):
        try:
            os.write(self._write, f"{line}\n".encode())
        except BrokenPipeError:     # the guard was killed: the launcher still stops its job itself
            pass

    def close(self):
        """The launcher's job is over: the guard stops what is still named (nothing, normally) and exits."""
        os.close(self._write)
        self.proc.wait()


def groups(fd):
    """The groups named and not taken back by the time pipe ``fd`` ends."""
    named, rest = set(), b""
    while True:
        chunk = os.read(fd, 4096)
        if not chunk:
            return named
        *lines, rest = (rest + chunk).split(b"\n")
        for line in lines:
            if line[:1] == b"+":
                named.add(int(line[1:]))
            else:
                named.discard(int(line[1:]))


def main(argv):
    for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(s, signal.SIG_IGN)        # it ends when the launcher does, and only then
    for pgid in sorted(groups(int(argv[1]))):
        try:
            os.killpg(pgid, signal.SIGKILL)
        except ProcessLookupError:
            pass


if __name__ == "__main__":
    main(sys.argv)
