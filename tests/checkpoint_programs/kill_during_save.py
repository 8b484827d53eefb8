"""Saves a checkpoint, then SIGKILLs itself in the middle of saving the next one to the same directory.

    python kill_during_save.py CKPT_DIR EXPECTED.npz file|swap

``file``: killed while the new checkpoint's second file is half written.
``swap``: killed between the two renames that put the new checkpoint in the
old one's place (the old one is then only at CKPT_DIR.old).
EXPECTED.npz receives the weights of the first, complete checkpoint.
"""
import io
import os
import signal
import sys

import numpy as np

import flowlayers as flow


def build():
    flow.clear_session()
    x = flow.Input((8,))
    h = flow.layers.Dense(16, activation="relu")(x)
    return flow.Model(x, flow.layers.Dense(3)(h))


def kill_while_writing_second_file(save=np.save):
    calls = []

    def half_then_kill(f, value, **kwargs):
        calls.append(1)
        if len(calls) < 2:
            return save(f, value, **kwargs)
        buf = io.BytesIO()
        save(buf, value, **kwargs)
        f.write(buf.getvalue()[:len(buf.getvalue()) // 2])
        f.flush()
        os.kill(os.getpid(), signal.SIGKILL)
    np.save = half_then_kill


def kill_between_renames(rename=os.rename):
    def rename_or_kill(src, dst):
        if ".tmp-" in os.path.basename(src):     # the old checkpoint is already at <dir>.old
            os.kill(os.getpid(), signal.SIGKILL)
        rename(src, dst)
    os.rename = rename_or_kill


if __name__ == "__main__":
    ckpt, expected, where = sys.argv[1:4]
    flow.config.gpu_device_num(2)
    model = build()
    model.save_weights(ckpt)
    np.savez(expected, *model.get_weights())
    model.set_weights([w + 1.0 for w in model.get_weights()])
    {"file": kill_while_writing_second_file, "swap": kill_between_renames}[where]()
    model.save_weights(ckpt)
    sys.exit("not killed")
