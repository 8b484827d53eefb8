"""One training program, run unchanged in one process or in several (``python -m flowlayers.launch``).

    python -m flowlayers.launch --processes 2 --devices-per-process 2 train.py OUT [options]
    python train.py OUT --devices 4 [options]                   # the same program in one process

Both faces: a Keras model trained by ``fit`` (MLP, with batch norm in the consistent view, SGD with momentum, seeded shuffle), then
``evaluate`` and ``predict``; and a OneFlow job function trained by calls.  Every process writes what it received
to ``OUT.<process index>.npz``: each must hold the whole logical values.  Options: ``--mesh data=2,model=2`` with
``--split`` (a layout rule splits the first kernel over ``model``); ``--save CKPT`` after training; ``--load CKPT``
into a fresh model, before ``evaluate``; ``--backup DIR`` (``BackupAndRestore(save_freq=2)``) with ``--kill-at S
--kill-process I`` (process I SIGKILLs itself after step S, once: a marker file beside the backup remembers);
``--shares sequence|dataset``: ``fit`` on batches in which each process holds its share of every global batch
(a per-process Sequence, or tf.data dataset), in process order.
"""
import argparse
import os
import signal
import time

import numpy as np

import flowlayers as flow

SAMPLES, BATCH, EPOCHS = 96, 16, 2        # 6 steps per epoch


def data():
    rng = np.random.default_rng(3)
    x = rng.normal(size=(SAMPLES, 8)).astype(np.float32)
    return x, ((x[:, 0] > 0).astype(np.int32) + (x[:, 1] > 0.5)).astype(np.int32)


def keras_model(view):
    x = flow.Input((8,))
    h = flow.layers.Dense(16, activation="relu", name="hidden")(x)
    if view == "consistent":    # the mirrored view normalises per replica, as MirroredStrategy: not one device's
        h = flow.layers.BatchNormalization(name="norm")(h)
    model = flow.Model(x, flow.layers.Dense(3, name="logits")(h))
    model.compile(flow.optimizers.SGD(0.1, momentum=0.9), flow.losses.SparseCategoricalCrossentropy(from_logits=True),
                  metrics=["accuracy"])
    return model


class Shares:
    """Batches as a ``keras.utils.PyDataset`` gives them: this process's ``share`` rows of each global batch."""

    def __init__(self, x, y, share, index):
        self.x, self.y, self.share, self.index = x, y, share, index

    def __len__(self):
        return SAMPLES // BATCH

    def __getitem__(self, i):
        rows = slice(i * BATCH + self.index * self.share, i * BATCH + (self.index + 1) * self.share)
        return self.x[rows], self.y[rows]


class KillOnce(flow.callbacks.Callback):
    def __init__(self, step, process, marker):
        super().__init__()
        self.step, self.process, self.marker = step, process, marker

    def on_train_batch_end(self, batch, logs=None):
        if (self.model.optimizer.iterations == self.step and flow.env.process_index() == self.process
                and not os.path.exists(self.marker)):
            with open(self.marker, "w") as f:
                f.write(repr(time.time()))      # when the job lost this process
            os.kill(os.getpid(), signal.SIGKILL)


class FirstStep(flow.callbacks.Callback):
    """Where this run's first step began: (epoch, batch in the epoch, optimizer step before it)."""

    def on_epoch_begin(self, epoch, logs=None):
        self.epoch = epoch

    def on_train_batch_begin(self, batch, logs=None):
        if not hasattr(self, "first"):
            self.first = (self.epoch, batch, self.model.optimizer.iterations)


def oneflow_job(x, y):
    """A OneFlow 0.x job function: two dense layers, SGD, trained a call per batch; returns its variables."""
    import flowlayers.typing as tp

    @flow.global_function(type="train")
    def train_job(images: tp.Numpy.Placeholder((BATCH, 8)),
                  labels: tp.Numpy.Placeholder((BATCH,), dtype=flow.int32)) -> tp.Numpy:
        hidden = flow.layers.dense(images, 16, activation=flow.nn.relu, name="job_hidden")
        logits = flow.layers.dense(hidden, 3, name="job_logits")
        loss = flow.nn.sparse_softmax_cross_entropy_with_logits(labels, logits)
        flow.optimizer.SGD(flow.optimizer.PiecewiseConstantScheduler([], [0.1]), momentum=0).minimize(loss)
        return loss

    losses = [train_job(x[i:i + BATCH], y[i:i + BATCH]).mean() for i in range(0, SAMPLES, BATCH)]
    variables = {k: v.numpy() for k, v in flow.get_all_variables().items() if k.startswith("job_")}
    return losses, variables


def oneflow_list_job(x):
    """Seed 000's mirrored style: a ``tp.ListNumpy`` placeholder takes one array per device of the whole job (in
    every process the same list, in device order); the job returns one array per device."""
    import flowlayers.typing as tp

    n = flow.config.device_num()
    config = flow.function_config()
    config.default_logical_view(flow.scope.mirrored_view())

    @flow.global_function(type="predict", function_config=config)
    def list_job(images: tp.ListNumpy.Placeholder((BATCH // n, 8))) -> tp.ListNumpy:
        return flow.math.reduce_sum(flow.layers.dense(images, 3, name="job_list"), axis=1)

    return np.concatenate(list_job(np.split(x[:BATCH], n)))


def main(argv=None):
    p = argparse.ArgumentParser()
    p.add_argument("out")
    p.add_argument("--view", default="consistent")
    p.add_argument("--devices", type=int, default=2, help="devices of each process")
    p.add_argument("--mesh", default=None)
    p.add_argument("--split", action="store_true")
    p.add_argument("--save")
    p.add_argument("--load")
    p.add_argument("--backup")
    p.add_argument("--kill-at", type=int)
    p.add_argument("--kill-process", type=int, default=1)
    p.add_argument("--oneflow", action="store_true")
    p.add_argument("--shares", choices=["sequence", "dataset"])
    a = p.parse_args(argv)

    flow.config.set_view(a.view)
    flow.config.gpu_device_num(a.devices)
    if a.mesh:
        flow.config.set_mesh(**{k: int(v) for k, v in (axis.split("=") for axis in a.mesh.split(","))})
    if a.split:
        flow.config.set_layout_rules({"hidden/kernel": (None, "model")})
    flow.config.set_seed(1)
    x, y = data()
    out = {}
    model = keras_model(a.view)
    if a.load:
        model.load_weights(a.load)
    else:
        callbacks, first = [], FirstStep()
        if a.backup:
            callbacks.append(flow.callbacks.BackupAndRestore(a.backup, save_freq=2))
        if a.kill_at:
            callbacks.append(KillOnce(a.kill_at, a.kill_process, os.path.join(a.backup, "killed")))
        if a.shares:
            share, me = BATCH // flow.env.process_count(), flow.env.process_index()
            shares = Shares(x, y, share, me)
            if a.shares == "dataset":      # a tf.data pipeline per process, of its shares
                import tensorflow as tf

                rows = [shares[i] for i in range(len(shares))]
                shares = tf.data.Dataset.from_tensor_slices(
                    (np.concatenate([r[0] for r in rows]), np.concatenate([r[1] for r in rows]))).batch(share)
            history = model.fit(shares, epochs=EPOCHS, verbose=0, callbacks=callbacks + [first])
        else:
            history = model.fit(x, y, batch_size=BATCH, epochs=EPOCHS, verbose=0, callbacks=callbacks + [first])
        out["loss"] = np.array(history.history["loss"])
        out["first"] = np.array(getattr(first, "first", (-1, -1, -1)))
    for i, w in enumerate(model.get_weights()):
        out[f"w{i}"] = w
    out["evaluate"] = np.array(model.evaluate(x, y, batch_size=BATCH, verbose=0))
    out["predict"] = model.predict(x, batch_size=BATCH, verbose=0)
    if a.save:
        model.save_weights(a.save)
    if a.oneflow:
        losses, variables = oneflow_job(x, y)
        out["job_losses"] = np.array(losses)
        if a.view == "mirrored":
            out["job_list"] = oneflow_list_job(x)
        out.update({f"job:{k}": v for k, v in variables.items()})
    out["processes"] = np.array([flow.env.process_index(), flow.env.process_count(), flow.config.device_num()])
    np.savez(f"{a.out}.{flow.env.process_index()}.npz", **out)
    print(f"done: process {flow.env.process_index()} of {flow.env.process_count()}", flush=True)


if __name__ == "__main__":
    main()
