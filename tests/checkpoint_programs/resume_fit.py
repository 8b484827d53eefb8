"""A small MLP trained by ``fit`` with ``BackupAndRestore(save_freq=2)``, run as a user runs it.

    python resume_fit.py VIEW BACKUP_DIR OUT.npz [--kill-once-at STEP]

With ``--kill-once-at`` it SIGKILLs itself right after that training step, but
only the first time (a marker file beside the backup remembers); run again, the
same command resumes from the backup.  OUT.npz receives the final weights, the
History and where this run's first step began.
"""
import json
import os
import signal
import sys

import numpy as np

import flowlayers as flow

EPOCHS, BATCH, SAMPLES = 3, 40, 200      # 5 steps per epoch


def data():
    rng = np.random.default_rng(7)
    x = rng.normal(size=(SAMPLES, 8)).astype(np.float32)
    return x, ((x[:, 0] > 0).astype(np.int32) + (x[:, 1] > 0.5)).astype(np.int32)


def build():
    flow.clear_session()
    x = flow.Input((8,))
    h = flow.layers.Dropout(0.25)(flow.layers.Dense(16, activation="relu")(x))
    model = flow.Model(x, flow.layers.Dense(3)(h))
    model.compile(flow.optimizers.Adam(0.01), flow.losses.SparseCategoricalCrossentropy(from_logits=True),
                  metrics=["accuracy"])
    return model


def train(view, callbacks=()):
    flow.config.set_view(view)
    flow.config.gpu_device_num(2)
    model = build()
    history = model.fit(*data(), batch_size=BATCH, epochs=EPOCHS, verbose=0, callbacks=list(callbacks))
    return model, history


class KillOnce(flow.callbacks.Callback):
    def __init__(self, step, marker):
        super().__init__()
        self.step, self.marker = step, marker

    def on_train_batch_end(self, batch, logs=None):
        if self.model.optimizer.iterations == self.step and not os.path.exists(self.marker):
            open(self.marker, "w").close()
            os.kill(os.getpid(), signal.SIGKILL)


class InterruptAt(flow.callbacks.Callback):
    """Ends ``fit`` with KeyboardInterrupt once the optimizer reaches ``step``: a kill, in the test's process."""

    def __init__(self, step):
        super().__init__()
        self.step = step

    def on_train_batch_end(self, batch, logs=None):
        if self.model.optimizer.iterations == self.step:
            raise KeyboardInterrupt


class FirstStep(flow.callbacks.Callback):
    """Where this run's first step began: (epoch, batch in epoch, optimizer step before it)."""

    def on_epoch_begin(self, epoch, logs=None):
        self.epoch = epoch

    def on_train_batch_begin(self, batch, logs=None):
        if not hasattr(self, "where"):
            self.where = [self.epoch, batch, self.model.optimizer.iterations]


def main(train):
    """The command line above, training with ``train(view, callbacks)``."""
    view, backup, out = sys.argv[1:4]
    first = FirstStep()
    callbacks = [flow.callbacks.BackupAndRestore(backup, save_freq=2), first]
    if "--kill-once-at" in sys.argv:
        callbacks.append(KillOnce(int(sys.argv[sys.argv.index("--kill-once-at") + 1]), backup + ".killed"))
    model, history = train(view, callbacks)
    np.savez(out, *model.get_weights(), meta=json.dumps({"history": history.history, "first_step": first.where}))


if __name__ == "__main__":
    main(train)
