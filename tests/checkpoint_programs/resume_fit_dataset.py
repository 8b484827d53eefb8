"""``resume_fit.py`` with a ``tf.data.Dataset`` input that a seeded shuffle reorders every epoch.

    python resume_fit_dataset.py VIEW BACKUP_DIR OUT.npz [--kill-once-at STEP]     (as resume_fit.py)

The rerun's dataset is a fresh object whose first iterator has the first
epoch's order; resuming in a later epoch must still give that epoch its own.
"""
import tensorflow as tf

import flowlayers as flow
from resume_fit import BATCH, EPOCHS, build, data, main


def dataset():
    return tf.data.Dataset.from_tensor_slices(data()).shuffle(200, seed=1).batch(BATCH)


def train(view, callbacks=()):
    flow.config.set_view(view)
    flow.config.gpu_device_num(2)       # sets the devices up before tf.data starts TF
    model = build()
    history = model.fit(dataset(), epochs=EPOCHS, verbose=0, callbacks=list(callbacks))
    return model, history


if __name__ == "__main__":
    main(train)
