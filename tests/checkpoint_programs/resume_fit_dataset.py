"""``resume_fit.py`` with a ``tf.data.Dataset`` input that a seeded shuffle reorders every epoch.

    python resume_fit_dataset.py VIEW BACKUP_DIR OUT.npz [--kill-once-at STEP]

The rerun's dataset is a fresh object whose first iterator has the first
epoch's order; resuming in a later epoch must still give that epoch its own.
"""
import json
import sys

import numpy as np
import tensorflow as tf

import flowlayers as flow
from flowlayers_tensorflow import devices
from resume_fit import BATCH, EPOCHS, FirstStep, KillOnce, build, data


def dataset():
    return tf.data.Dataset.from_tensor_slices(data()).shuffle(200, seed=1).batch(BATCH)


def train(view, callbacks=()):
    flow.config.set_view(view)
    flow.config.gpu_device_num(2)
    devices.devices(2)      # TF's logical devices exist only if made before tf.data starts TF
    model = build()
    history = model.fit(dataset(), epochs=EPOCHS, verbose=0, callbacks=list(callbacks))
    return model, history


if __name__ == "__main__":
    view, backup, out = sys.argv[1:4]
    first = FirstStep()
    callbacks = [flow.callbacks.BackupAndRestore(backup, save_freq=2), first]
    if "--kill-once-at" in sys.argv:
        callbacks.append(KillOnce(int(sys.argv[sys.argv.index("--kill-once-at") + 1]), backup + ".killed"))
    model, history = train(view, callbacks)
    np.savez(out, *model.get_weights(), meta=json.dumps({"history": history.history, "first_step": first.where}))
