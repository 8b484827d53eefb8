"""One program, several processes: the launcher, and a job that survives losing one.

    python -m flowlayers.launch --processes 2 --devices-per-process 2 tutorials/09_processes.py
    python -m flowlayers.launch --processes 2 --devices-per-process 2 tutorials/09_processes.py --view mirrored
    python tutorials/09_processes.py --devices 4          # the same program, one process of 4 devices

The launcher starts the script in each process (as ``torchrun`` does): the
script does not change.  ``flow.config.gpu_device_num(2)`` counts the devices
of *one* process (OneFlow's count per machine), so two processes give a mesh of
four devices, and every process makes the same calls and gets the same whole
values back -- ``fit``, ``evaluate``, ``get_weights``, ``save_weights``.  The
engine's own distributed runtime carries the traffic: DTensor multi-client or
MultiWorkerMirroredStrategy on TensorFlow, ``jax.distributed`` on JAX.

Part 1 trains a CNN on scikit-learn's bundled digits with ``BackupAndRestore``
and prints, from process 0, what it learned.  Part 2 reads the checkpoint the
processes wrote once back into a fresh model in every process.  Checkpoints and
backups are logical, so they load in any number of processes: kill a process
mid-run (the launcher then stops the job) and run the launcher again, with
``--processes 1`` if you like, and ``fit`` goes on from the step and data
position of the last backup (``tests/processes`` does exactly that).
``--smoke`` trains a few steps.

Started by a cluster, the same script needs no launcher: under SLURM
(``srun --ntasks 2 python tutorials/09_processes.py``), Open MPI
(``mpirun -n 2 ...``), a Kubernetes Indexed Job or ``TF_CONFIG``, every
process reads its place in the job from the variables its starter set
(process 0 says in one line what it found).  The launcher restarts a job
itself: ``--max-restarts 3`` stops the others when a process fails or hangs
and starts the whole job again, which resumes here from the last backup; with
``--hosts a,b --coordinator a:7000 --elastic 1:2`` a host whose launcher is
lost is dropped and the job goes on without it, and a launcher that comes back
is taken in at the next backup.  docs/howto/processes.md has every flag.
"""
import argparse
import os
import tempfile

import numpy as np

import flowlayers as flow


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--devices", type=int, default=2, help="devices of each process (logical CPUs stand in)")
    parser.add_argument("--view", default="consistent", choices=["consistent", "mirrored"])
    parser.add_argument("--epochs", type=int, default=4)
    parser.add_argument("--workdir", default=None, help="where the backup and weights go (shared by the processes)")
    parser.add_argument("--smoke", action="store_true", help="train a few steps only (a wiring check)")
    return parser.parse_args(argv)


def say(*args):
    """Print once for the job: every process runs this script, and process 0 speaks for all."""
    if flow.env.process_index() == 0:
        print(*args, flush=True)


def build():
    model = flow.Sequential([
        flow.layers.Conv2D(16, 3, padding="same", activation="relu", input_shape=(8, 8, 1)),
        flow.layers.MaxPooling2D(2),
        flow.layers.Flatten(),
        flow.layers.Dense(64, activation="relu"),
        flow.layers.Dense(10),
    ])
    model.compile(flow.optimizers.SGD(0.05, momentum=0.9),
                  flow.losses.SparseCategoricalCrossentropy(from_logits=True), metrics=["accuracy"])
    return model


def main(args):
    flow.config.gpu_device_num(args.devices)
    flow.config.set_view(args.view)
    flow.config.set_seed(0)
    (x, y), (x_test, y_test) = flow.data.load_digits(image_format="NHWC")
    epochs = args.epochs
    if args.smoke:
        x, y, epochs = x[:256], y[:256], 1
    workdir = args.workdir or os.path.join(tempfile.gettempdir(), f"flowlayers-09-{os.getuid()}")

    # ---------------------------------------------------------------------
    # Part 1. The same program in every process.
    # ---------------------------------------------------------------------
    say(f"process {flow.env.process_index()} of {flow.env.process_count()}: {args.devices} device(s) each, "
        f"{flow.config.device_num()} in the job, view {args.view}")
    print(f"process {flow.env.process_index()} is here", flush=True)
    model = build()
    backup = flow.callbacks.BackupAndRestore(os.path.join(workdir, "backup"), save_freq=5)
    history = model.fit(x, y, batch_size=64, epochs=epochs, verbose=0, callbacks=[backup])
    loss, accuracy = model.evaluate(x_test, y_test, batch_size=64, verbose=0)
    say(f"train loss by epoch: {', '.join(f'{v:.4f}' for v in history.history['loss'])}")
    say(f"test loss: {loss:.4f}  test accuracy: {accuracy:.4f}")

    # every process calls save_weights, as one process would; the checkpoint is written once
    model.save_weights(os.path.join(workdir, "weights"))
    checksum = float(sum(np.abs(w).sum() for w in model.get_weights()))
    print(f"process {flow.env.process_index()}: weights checksum {checksum:.6f}", flush=True)

    # ---------------------------------------------------------------------
    # Part 2. Any process count reads what any process count wrote.
    # ---------------------------------------------------------------------
    flow.clear_session()        # the same automatic layer names again
    fresh = build()
    fresh.load_weights(os.path.join(workdir, "weights"))
    same = all(np.array_equal(a, b) for a, b in zip(fresh.get_weights(), model.get_weights()))
    say(f"weights loaded back by {flow.env.process_count()} process(es) are bit-identical: {same}")
    say("a backup written by these processes resumes in any number of them: run the launcher again with "
        "--processes 1 (or 4) after a crash, and fit continues from the step and batch it holds")


if __name__ == "__main__":
    main(parse_args())
