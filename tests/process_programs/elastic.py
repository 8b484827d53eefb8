"""``train.py``'s model and data, trained longer and at a set pace, for jobs whose hosts come and go.

    python -m flowlayers.launch --hosts 127.0.0.1,127.0.0.1 --host-index H --coordinator 127.0.0.1:PORT \\
        --processes 2 --elastic 1:2 --max-restarts 3 elastic.py OUT --backup DIR --pace 1
    python elastic.py OUT --devices 4                  # the uninterrupted run, one process

``BackupAndRestore(save_freq=2)`` with ``--backup``; each step lasts at least ``--pace`` seconds; process 0 says
when each epoch begins (``epoch E begins at step S``).  Every process writes ``OUT.<process index>.npz`` at the
end: the weights, the predictions, where this start's first step began and the job's processes.
"""
import argparse
import time

import numpy as np

import flowlayers as flow
from train import BATCH, FirstStep, data, keras_model

EPOCHS = 6      # 36 steps


class Pace(flow.callbacks.Callback):
    def __init__(self, seconds):
        super().__init__()
        self.seconds = seconds

    def on_epoch_begin(self, epoch, logs=None):
        if flow.env.process_index() == 0:
            print(f"epoch {epoch + 1} begins at step {self.model.optimizer.iterations}", flush=True)

    def on_train_batch_end(self, batch, logs=None):
        time.sleep(self.seconds)


def main(argv=None):
    p = argparse.ArgumentParser()
    p.add_argument("out")
    p.add_argument("--view", default="consistent")
    p.add_argument("--devices", type=int, default=1, help="devices of each process")
    p.add_argument("--backup")
    p.add_argument("--pace", type=float, default=0.0)
    a = p.parse_args(argv)

    flow.config.set_view(a.view)
    flow.config.gpu_device_num(a.devices)
    flow.config.set_seed(1)
    x, y = data()
    model = keras_model(a.view)
    first = FirstStep()
    callbacks = [first, Pace(a.pace)]
    if a.backup:
        callbacks.insert(0, flow.callbacks.BackupAndRestore(a.backup, save_freq=2))
    model.fit(x, y, batch_size=BATCH, epochs=EPOCHS, verbose=0, callbacks=callbacks)
    out = {f"w{i}": w for i, w in enumerate(model.get_weights())}
    out["predict"] = model.predict(x, batch_size=BATCH, verbose=0)
    out["first"] = np.array(getattr(first, "first", (-1, -1, -1)))
    out["processes"] = np.array([flow.env.process_index(), flow.env.process_count(), flow.config.device_num()])
    np.savez(f"{a.out}.{flow.env.process_index()}.npz", **out)
    print(f"done: process {flow.env.process_index()} of {flow.env.process_count()}", flush=True)


if __name__ == "__main__":
    main()
