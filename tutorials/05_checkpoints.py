"""Checkpoints across views, and resuming after a crash.

    python tutorials/05_checkpoints.py               # 4 devices: a 2 x 2 mesh, then 2, then 1
    python tutorials/05_checkpoints.py --smoke

A checkpoint holds *logical* arrays -- each variable whole, keyed by its path
-- so it does not care where it was written.  Part 1 saves a model trained
on a 2 x 2 hybrid mesh and loads it in the mirrored view on 2 devices and on
one device.  Part 2 shows that a checkpoint which does not fit, or is damaged,
is refused with a message naming the variable or the file, and changes
nothing.  Part 3 kills a training process with SIGKILL -- as the OOM killer or
a pre-empted machine would -- runs the same command again, and gets the
weights of a run that was never interrupted.  Part 4 does the same with the
job-function face: ``flow.train.CheckPoint`` saves a train job mid-run on 2
devices in the consistent view, and the run goes on in the mirrored view on
one device from the step the checkpoint gives back.
"""
import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import time

import numpy as np

import flowlayers as flow
import flowlayers.typing as tp

EPOCHS, BATCH = 2, 64


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--smoke", action="store_true", help="use a few batches only (a wiring check)")
    parser.add_argument("--workdir", default=None, help="where checkpoints go; default: a temporary directory")
    # Used by Part 3, which runs this file again as the training job it kills.
    parser.add_argument("--train-job", metavar="BACKUP_DIR", default=None, help=argparse.SUPPRESS)
    parser.add_argument("--crash-at-step", type=int, default=None, help=argparse.SUPPRESS)
    parser.add_argument("--weights-out", default=None, help=argparse.SUPPRESS)
    return parser.parse_args(argv)


def build_model(hidden=64):
    flow.clear_session()
    x = flow.Input((1, 8, 8))
    h = flow.layers.Flatten()(x)
    h = flow.layers.Dense(hidden, activation="relu", name="hidden")(h)
    model = flow.Model(x, flow.layers.Dense(10, name="logits")(h))
    model.compile(optimizer=flow.optimizers.Adam(0.003),
                  loss=flow.losses.SparseCategoricalCrossentropy(from_logits=True), metrics=["accuracy"])
    return model


def place(view, devices, mesh=None, rules=None):
    flow.config.set_view(view)
    flow.config.gpu_device_num(devices)
    flow.config.set_mesh(**(mesh or {}))
    flow.config.set_layout_rules(rules or {})


def data(smoke):
    (x, y), (x_test, y_test) = flow.data.load_digits()
    return (x[:320], y[:320], x_test[:64]) if smoke else (x, y, x_test)


# ---------------------------------------------------------------------------
# Part 1. Save on a 2 x 2 hybrid mesh; load in the mirrored view, on 2 devices and on 1.
# ---------------------------------------------------------------------------
def across_views(workdir, smoke):
    x, y, x_test = data(smoke)
    place("consistent", 4, mesh={"data": 2, "model": 2},
          rules={r"^hidden/kernel$": (None, "model"), r"^hidden/bias$": ("model",),
                 r"^logits/kernel$": ("model", None)})
    model = build_model()
    model.fit(x, y, batch_size=BATCH, epochs=1, verbose=0)
    hybrid = model.parallel_plan().variables["hidden/kernel"]
    print(f"  trained on a 2 x 2 mesh; each device holds {hybrid.shard_shape} of hidden/kernel {hybrid.logical_shape}")
    path = os.path.join(workdir, "hybrid_ckpt")
    model.save_weights(path)
    # One .npy per variable (optimizer slots included), and a manifest with shapes, dtypes and checksums.
    manifest = json.load(open(os.path.join(path, "manifest.json")))
    print(f"  saved {len(manifest['variables'])} logical arrays to {os.path.basename(path)}/: "
          f"{', '.join(sorted(manifest['variables']))}")
    weights, predictions = model.get_weights(), model.predict(x_test, verbose=0)

    for view, devices in (("mirrored", 2), ("mirrored", 1)):
        place(view, devices)
        restored = build_model()
        restored.load_weights(path)          # resharded to the place in force: here, whole copies
        same = all(np.array_equal(a, b) for a, b in zip(weights, restored.get_weights()))
        diff = np.abs(restored.predict(x_test, verbose=0) - predictions).max()
        print(f"  loaded in the {view} view on {devices} device(s): weights bit-identical {same}, "
              f"max |prediction diff| {diff:.1e}")
    return path, restored


# ---------------------------------------------------------------------------
# Part 2. A checkpoint that does not fit, or is damaged, changes nothing.
# ---------------------------------------------------------------------------
def refused(path, model, workdir):
    before = model.get_weights()
    other = build_model(hidden=32)            # another architecture: hidden has 32 units, not 64
    other_path = os.path.join(workdir, "other_ckpt")
    other.save_weights(other_path)
    try:
        model.load_weights(other_path)
    except flow.CheckpointError as e:
        print(f"  another architecture is refused: {e}")

    damaged = os.path.join(workdir, "damaged_ckpt")
    model.save_weights(damaged)
    victim = sorted(f for f in os.listdir(damaged) if f.endswith(".npy"))[0]
    with open(os.path.join(damaged, victim), "r+b") as f:     # cut a file short, as a full disk would
        f.truncate(os.path.getsize(f.name) // 2)
    try:
        model.load_weights(damaged)
    except flow.CheckpointError as e:
        print(f"  a truncated file is refused: {e}")
    unchanged = all(np.array_equal(a, b) for a, b in zip(before, model.get_weights()))
    print(f"  weights unchanged after both: {unchanged}")


# ---------------------------------------------------------------------------
# Part 3. Kill a training job, run it again, compare with an uninterrupted run.
# ---------------------------------------------------------------------------
class KillAt(flow.callbacks.Callback):
    """Simulates a crash: SIGKILL this process after training step ``step`` -- no cleanup, no goodbye."""

    def __init__(self, step):
        super().__init__()
        self.step = step

    def on_train_begin(self, logs=None):
        print(f"  job: starting at step {self.model.optimizer.iterations}", flush=True)

    def on_train_batch_end(self, batch, logs=None):
        if self.model.optimizer.iterations == self.step:
            print(f"  job: killed after step {self.step}", flush=True)
            os.kill(os.getpid(), signal.SIGKILL)


def train_job(args):
    """The training job of Part 3, run in its own process: an ordinary fit with BackupAndRestore."""
    place("consistent", 2)
    x, y, _ = data(args.smoke)
    model = build_model()
    # save_freq=2: a backup every 2 steps (weights, optimizer state, data position);
    # on a rerun, fit resumes from it at that step.  Keras' callback can only go back
    # to the start of an epoch.
    backup = flow.callbacks.BackupAndRestore(args.train_job, save_freq=2)
    model.fit(x, y, batch_size=BATCH, epochs=EPOCHS, verbose=0, callbacks=[backup, KillAt(args.crash_at_step)])
    np.savez(args.weights_out, *model.get_weights())
    print(f"  job: finished at step {model.optimizer.iterations}", flush=True)


def crash_and_resume(workdir, smoke):
    x, y, _ = data(smoke)
    steps_per_epoch = -(-len(x) // BATCH)
    crash_at = steps_per_epoch + steps_per_epoch // 2            # in the middle of the second epoch,
    crash_at += 1 - crash_at % 2                                 # one step after a backup (odd)
    backup_dir, weights = os.path.join(workdir, "backup"), os.path.join(workdir, "resumed.npz")
    command = [sys.executable, os.path.abspath(__file__), "--train-job", backup_dir, "--weights-out", weights]
    command += ["--smoke"] if smoke else []
    env = dict(os.environ, FLOWLAYERS_CPU_DEVICES="2")

    first = subprocess.run(command + ["--crash-at-step", str(crash_at)], env=env, capture_output=True, text=True)
    print(first.stdout.rstrip())
    how = "killed by SIGKILL" if first.returncode == -signal.SIGKILL else "NOT killed: see its stderr"
    print(f"  exit status {first.returncode} ({how}); backup left in {os.path.basename(backup_dir)}/: "
          f"{os.path.isdir(backup_dir)}")
    if first.returncode != -signal.SIGKILL:
        sys.exit(f"the job was expected to be killed:\n{first.stderr[-3000:]}")
    second = subprocess.run(command, env=env, capture_output=True, text=True)   # the same command again
    print(second.stdout.rstrip())
    if second.returncode != 0:
        sys.exit(f"the rerun failed:\n{second.stderr[-3000:]}")

    # The reference: the same training, never interrupted, in this process.
    place("consistent", 2)
    reference = build_model()
    reference.fit(x, y, batch_size=BATCH, epochs=EPOCHS, verbose=0)
    resumed = np.load(weights)
    diff = max(float(np.abs(resumed[f"arr_{i}"] - w).max()) for i, w in enumerate(reference.get_weights()))
    print(f"  resumed run vs uninterrupted run: max |w diff| {diff:.1e}; backup removed after success: "
          f"{not os.path.isdir(backup_dir)}")
    return diff


# ---------------------------------------------------------------------------
# Part 4. The job-function face: flow.train.CheckPoint, saved in one view, loaded in another.
# ---------------------------------------------------------------------------
def make_jobs(view):
    """A train job and a predict job; they share the layers "hidden" and "logits" by name."""
    flow.clear_session()
    cfg = flow.function_config()
    cfg.default_logical_view(flow.scope.consistent_view() if view == "consistent" else flow.scope.mirrored_view())

    def mlp(images):
        h = flow.layers.dense(flow.reshape(images, [BATCH, 64]), 64, activation=flow.nn.relu, name="hidden")
        return flow.layers.dense(h, 10, name="logits")

    @flow.global_function(type="train", function_config=cfg)
    def train_job(images: tp.Numpy.Placeholder((BATCH, 1, 8, 8)),
                  labels: tp.Numpy.Placeholder((BATCH,), dtype=flow.int32)) -> tp.Numpy:
        loss = flow.nn.sparse_softmax_cross_entropy_with_logits(labels, mlp(images))
        flow.optimizer.Adam(flow.optimizer.PiecewiseConstantScheduler([], [0.003])).minimize(loss)
        return loss

    @flow.global_function(type="predict", function_config=cfg)
    def predict_job(images: tp.Numpy.Placeholder((BATCH, 1, 8, 8))) -> tp.Numpy:
        return mlp(images)
    return train_job, predict_job


def job_face(workdir, smoke):
    x, y, x_test = data(smoke)
    batches = [(x[i:i + BATCH], y[i:i + BATCH]) for i in range(0, len(x) - BATCH + 1, BATCH)]
    path, half = os.path.join(workdir, "job_ckpt"), len(batches) // 2

    def train(view, devices, until, resume=False, save=False):
        place(view, devices)
        train_job, predict_job = make_jobs(view)
        ckpt = flow.train.CheckPoint()
        start = ckpt.load(path)["train_job"] if resume else 0     # weights, Adam's slots and the step
        if resume:
            print(f"  loaded in the {view} view on {devices} device(s): train_job resumes at step {start}")
        for step in range(start, until):
            train_job(*batches[step])
        if save:
            ckpt.save(path)
            print(f"  trained in the {view} view on {devices} device(s), saved at step {until}")
        return predict_job(x_test[:BATCH])

    never_stopped = train("consistent", 2, len(batches))
    train("consistent", 2, half, save=True)          # stops half way: a crash, or the end of a time slot
    resumed = train("mirrored", 1, len(batches), resume=True)
    diff = np.abs(resumed - never_stopped).max()
    print(f"  resumed in another view vs never stopped: max |prediction diff| {diff:.1e}")


def main(argv=None):
    args = parse_args(argv)
    if args.train_job:
        return train_job(args)
    start = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        workdir = args.workdir or tmp
        os.makedirs(workdir, exist_ok=True)
        print("== Part 1: save on a 2 x 2 mesh, load anywhere")
        path, model = across_views(workdir, args.smoke)
        print("== Part 2: a checkpoint that does not fit is refused")
        refused(path, model, workdir)
        print("== Part 3: killed, run again, resumed at the last saved step")
        crash_and_resume(workdir, args.smoke)
        print("== Part 4: the job-function face, flow.train.CheckPoint")
        job_face(workdir, args.smoke)
    print(f"done in {time.perf_counter() - start:.1f}s")


if __name__ == "__main__":
    main()
