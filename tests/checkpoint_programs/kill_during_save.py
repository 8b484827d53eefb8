"""Saves a checkpoint, then SIGKILLs itself at one step of saving the next one to the same directory.

    python kill_during_save.py CKPT_DIR EXPECTED.npz STEP

STEP is one of ``checkpoint_format.STEPS``: the process dies the first time
the second save passes it (``file written``: the new checkpoint's first file
is written, nothing else; ``moved aside``: the old checkpoint is at
``.<name>.old``, the new one at ``.<name>.new``).  EXPECTED.npz receives the
weights of both saves, ``first_<i>`` and ``second_<i>``.
"""
import os
import signal
import sys

import numpy as np

import flowlayers as flow
from flowlayers.framework import checkpoint_format


def build():
    flow.clear_session()
    x = flow.Input((8,))
    h = flow.layers.Dense(16, activation="relu")(x)
    return flow.Model(x, flow.layers.Dense(3)(h))


def kill_at(step):
    def hook(name):
        if name == step:
            os.kill(os.getpid(), signal.SIGKILL)
    checkpoint_format.at_step = hook


if __name__ == "__main__":
    ckpt, expected, step = sys.argv[1:4]
    flow.config.gpu_device_num(2)
    model = build()
    model.save_weights(ckpt)
    first = model.get_weights()
    model.set_weights([w + 1.0 for w in first])
    np.savez(expected, **{f"first_{i}": w for i, w in enumerate(first)},
             **{f"second_{i}": w for i, w in enumerate(model.get_weights())})
    kill_at(step)
    model.save_weights(ckpt)
    sys.exit("not killed")
