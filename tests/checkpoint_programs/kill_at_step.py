"""Writes one checkpoint over another and SIGKILLs itself at a chosen step of that save (by the writer's test
hook, not by timing luck).

    python kill_at_step.py SOURCE TARGET STEP [OCCURRENCE]

The arrays and state of checkpoint SOURCE (read and verified) are written as
checkpoint TARGET by ``checkpoint_format.write``; the process dies the
OCCURRENCE-th time (default 1) that save passes STEP, one of
``checkpoint_format.STEPS``.  Only the checkpoint format is imported: no
engine starts.
"""
import os
import signal
import sys

from flowlayers.framework import checkpoint_format


def kill_at(step, occurrence):
    passed = []

    def hook(name):
        if name == step:
            passed.append(name)
            if len(passed) == occurrence:
                os.kill(os.getpid(), signal.SIGKILL)
    checkpoint_format.at_step = hook
    return passed


if __name__ == "__main__":
    source, target, step = sys.argv[1:4]
    reader = checkpoint_format.Reader(source)
    reader.verify(reader.entries)
    values = {key: reader.read(key) for key in reader.entries}
    passed = kill_at(step, int(sys.argv[4]) if len(sys.argv) > 4 else 1)
    checkpoint_format.write(target, values, reader.state)
    sys.exit(f"not killed: the save passed {step!r} {len(passed)} times")
