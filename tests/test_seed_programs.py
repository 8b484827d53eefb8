"""The two OneFlow MNIST programs of seeds/000 run unchanged on flowlayers.

``seed_programs/mirrored_strategy.py`` and ``seed_programs/consistent_strategy.py``
are the programs of seeds/000 ("Consistent & Mirrored View") copied verbatim;
only ``import oneflow`` became ``import flowlayers`` (and ``oneflow.typing``
``flowlayers.typing``).  Each runs as a user would run it, in its own
process with 2 logical CPU devices, reading MNIST from the Keras cache
(``$KERAS_HOME/datasets/mnist.npz``, written here from ``../shared/data``,
whose 10,000 images give ``load_mnist(100)`` 100 batches).

Both programs print the loss every 20 batches (i = 0, 20, 40, 60, 80, ...).
The fifth number is the loss after 80 batches, i.e. one pass over 8,000
images; the test asks that a printed loss has fallen below 0.6 by then.
The mirrored program stops by itself after its one epoch of 100 batches; the
consistent one loops for 50 epochs, so it is stopped once the fifth number
is out.
"""
import math
import os
import queue
import subprocess
import sys
import threading
import time
import warnings
from pathlib import Path

import pytest

import flowlayers as flow

pytestmark = pytest.mark.slow     # each program runs in a process of its own

PROGRAMS = Path(__file__).resolve().parent / "seed_programs"
LOSSES_IN_ONE_EPOCH = 5      # printed at i = 0, 20, 40, 60, 80: the last after 80 batches (8,000 images)
TARGET_LOSS = 0.6


@pytest.fixture
def keras_home(tmp_path, shared_data):
    """A Keras cache holding ``datasets/mnist.npz`` made from the shared MNIST test set."""
    datasets = tmp_path / "keras" / "datasets"
    datasets.mkdir(parents=True)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")          # "the test set doubles as the training set": known here
        flow.data.write_mnist_npz(datasets / "mnist.npz", shared_data)
    return tmp_path / "keras"


def _env(keras_home):
    env = dict(os.environ, KERAS_HOME=str(keras_home), FLOWLAYERS_CPU_DEVICES="2",
               TF_CPP_MIN_LOG_LEVEL="3", PYTHONUNBUFFERED="1")
    env.pop("FLOWLAYERS_VIEW", None)   # the programs choose their view themselves (or take the default)
    return env


def _run(program, keras_home, cwd, stop_after, timeout):
    """Run ``program``; return (printed losses, exit code or None if we stopped it, stderr tail).

    Reads stdout line by line and stops the process once ``stop_after``
    numbers are printed (``None``: let it finish).  Fails the test on timeout.
    """
    stderr_path = cwd / f"{program.stem}.stderr"
    with open(stderr_path, "w") as stderr:
        proc = subprocess.Popen([sys.executable, "-u", str(program)], cwd=cwd, env=_env(keras_home),
                                stdout=subprocess.PIPE, stderr=stderr, text=True)
        lines = queue.Queue()
        reader = threading.Thread(target=lambda: [lines.put(l) for l in proc.stdout] + [lines.put(None)],
                                  daemon=True)
        reader.start()
        losses, deadline, stopped = [], time.monotonic() + timeout, False
        try:
            while True:
                try:
                    line = lines.get(timeout=max(deadline - time.monotonic(), 0.01))
                except queue.Empty:
                    pytest.fail(f"{program.name}: no end after {timeout}s; printed so far: {losses}\n"
                                f"{_tail(stderr_path)}")
                if line is None:
                    break
                try:
                    losses.append(float(line))
                except ValueError:
                    continue                        # not a loss line
                if stop_after is not None and len(losses) >= stop_after:
                    stopped = True
                    break
        finally:
            if proc.poll() is None:
                proc.kill()
            proc.wait()
            proc.stdout.close()
    return losses, None if stopped else proc.returncode, _tail(stderr_path)


def _tail(path, n=3000):
    text = Path(path).read_text(errors="replace")
    return "stderr (tail):\n" + text[-n:]


def _check_losses(name, losses, stderr):
    first_epoch = losses[:LOSSES_IN_ONE_EPOCH]
    assert len(first_epoch) == LOSSES_IN_ONE_EPOCH, \
        f"{name}: expected {LOSSES_IN_ONE_EPOCH} printed losses (i = 0, 20, ..., 80), received {losses}\n{stderr}"
    assert all(math.isfinite(x) for x in first_epoch), f"{name}: non-finite loss in {first_epoch}"
    assert min(first_epoch) < TARGET_LOSS, \
        f"{name}: expected a printed loss below {TARGET_LOSS} within 80 batches, received {first_epoch}"


def test_mirrored_program_of_seed_000(keras_home, tmp_path):
    # The whole program: one epoch of 100 batches, then it exits.
    losses, returncode, stderr = _run(PROGRAMS / "mirrored_strategy.py", keras_home, tmp_path,
                                      stop_after=None, timeout=300)
    assert returncode == 0, f"mirrored_strategy.py exited with {returncode}; printed {losses}\n{stderr}"
    _check_losses("mirrored_strategy.py", losses, stderr)


def test_consistent_program_of_seed_000(keras_home, tmp_path):
    # ``for epoch in range(50)``: stopped once the loss after 80 batches is printed.
    losses, returncode, stderr = _run(PROGRAMS / "consistent_strategy.py", keras_home, tmp_path,
                                      stop_after=LOSSES_IN_ONE_EPOCH, timeout=420)
    assert returncode is None, f"consistent_strategy.py exited with {returncode}; printed {losses}\n{stderr}"
    _check_losses("consistent_strategy.py", losses, stderr)
