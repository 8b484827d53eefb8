"""A small ``fit`` that one process stalls on purpose, for the launcher's watch (``tests/processes/test_watch.py``).

    python -m flowlayers.launch --processes 2 --timeout T hang.py DIR --hang before|step [--process 1]

Every process first starts a grandchild (``sleep``) and writes ``DIR/pids.<index>``: its
pid and the grandchild's, each with its start time (so a pid reused later is not mistaken for it).  Then process
``--process`` hangs: ``before`` its first step (before ``fit``; its peers go on into the first step and wait there),
or at ``step`` 5, in a callback after the step (its peers begin step 6 and wait in its collective).  It writes
``DIR/hung`` (the time) as it begins to hang.  ``--hang none`` trains to the end.
"""
import argparse
import os
import subprocess
import time

import numpy as np

import flowlayers as flow

HANG_STEP = 5


def started(pid):
    """The start time of process ``pid`` (clock ticks since boot: field 22 of /proc/PID/stat)."""
    with open(f"/proc/{pid}/stat") as f:
        return int(f.read().rsplit(")", 1)[1].split()[19])


def hang(out):
    with open(os.path.join(out, "hung"), "w") as f:
        f.write(repr(time.time()))
    time.sleep(10 ** 6)


class HangAt(flow.callbacks.Callback):
    def __init__(self, out):
        super().__init__()
        self.out = out

    def on_train_batch_end(self, batch, logs=None):
        if self.model.optimizer.iterations == HANG_STEP:
            hang(self.out)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("out")
    p.add_argument("--hang", choices=["none", "before", "step"], default="none")
    p.add_argument("--process", type=int, default=1)
    a = p.parse_args()
    grandchild = subprocess.Popen(["sleep", "1000"])
    me = int(os.environ.get("FLOWLAYERS_PROCESS_INDEX", "0"))
    with open(os.path.join(a.out, f"pids.{me}"), "w") as f:
        f.write(f"{os.getpid()} {started(os.getpid())} {grandchild.pid} {started(grandchild.pid)}\n")

    flow.config.gpu_device_num(1)
    rng = np.random.default_rng(0)
    x = rng.normal(size=(256, 4)).astype(np.float32)
    y = x @ np.arange(1, 5, dtype=np.float32)[:, None]
    model = flow.Sequential([flow.Input((4,)), flow.layers.Dense(1)])
    model.compile(flow.optimizers.SGD(0.01), "mse")
    mine = flow.env.process_index() == a.process
    if mine and a.hang == "before":
        hang(a.out)
    callbacks = [HangAt(a.out)] if mine and a.hang == "step" else []
    model.fit(x, y, batch_size=16, epochs=2, verbose=0, callbacks=callbacks)
    grandchild.kill()
    grandchild.wait()
    print(f"done: process {flow.env.process_index()}", flush=True)


if __name__ == "__main__":
    main()
