"""What a restart costs: seconds from a process's death to the first step of the job started again.

    python bench/bench_restart.py                   # prints the table
    python bench/bench_restart.py --write           # ... and appends it to bench/RESULTS_processes.md

For each backend installed and each view, ``python -m flowlayers.launch --processes 2 --max-restarts 1`` runs a
worker that trains an MLP with ``BackupAndRestore(save_freq=2)``; at step ``--kill-at`` of the first start,
process 1 writes the time and SIGKILLs itself.  The launcher stops process 0 and starts the job again, which
resumes from the backup.  Each process of the second start writes the time of its first step; the figure is the
later of the two minus the death: the stop, a fresh start of both processes (Python, the engine, the distributed
runtime), the model built and compiled again and the backup read.  Each round is a fresh launch; the table gives
the median over ``--repeats`` rounds and, for scale, the time of the first start from launch to its first step.
"""
import argparse
import os
import platform
import signal
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)


def worker(args):
    import numpy as np

    import flowlayers as flow

    flow.config.gpu_device_num(1)
    flow.config.set_view(args.view)
    rng = np.random.default_rng(0)
    x = rng.normal(size=(64 * 40, 784)).astype(np.float32)
    y = rng.integers(0, 10, size=len(x)).astype(np.int32)
    model = flow.Sequential([flow.layers.Dense(256, activation="relu", input_shape=(784,)),
                             flow.layers.Dense(10)])
    model.compile(optimizer=flow.optimizers.SGD(0.01, momentum=0.9),
                  loss=flow.losses.SparseCategoricalCrossentropy(from_logits=True))
    me = flow.env.process_index()
    second = os.path.exists(os.path.join(args.folder, "died"))

    class Clock(flow.callbacks.Callback):
        def on_train_batch_begin(self, batch, logs=None):
            step = int(self.model.optimizer.iterations)
            if not getattr(self, "seen", False):
                self.seen = True
                name = f"first-{'second' if second else 'first'}-{me}"
                with open(os.path.join(args.folder, name), "w") as f:
                    f.write(repr(time.time()))
            if not second and me == 1 and step == args.kill_at:
                with open(os.path.join(args.folder, "died"), "w") as f:
                    f.write(repr(time.time()))
                os.kill(os.getpid(), signal.SIGKILL)

    model.fit(x, y, batch_size=64, epochs=2, verbose=0,
              callbacks=[flow.callbacks.BackupAndRestore(os.path.join(args.folder, "backup"), save_freq=2), Clock()])


def one_round(backend, view, kill_at, grace):
    with tempfile.TemporaryDirectory() as folder:
        env = dict(os.environ, FLOWLAYERS_BACKEND=backend,
                   PYTHONPATH=os.pathsep.join([ROOT, os.path.join(ROOT, "backends"), os.environ.get("PYTHONPATH", "")]))
        started = time.time()
        command = [sys.executable, "-m", "flowlayers.launch", "--processes", "2", "--max-restarts", "1",
                   "--grace-period", str(grace), os.path.abspath(__file__), "--worker", "--view", view,
                   "--folder", folder, "--kill-at", str(kill_at)]
        r = subprocess.run(command, env=env, capture_output=True, text=True, timeout=900)
        if r.returncode != 0:
            raise RuntimeError(f"{backend} {view}: the launch failed ({r.returncode}):\n{r.stdout}\n{r.stderr}")

        def read(name):
            with open(os.path.join(folder, name)) as f:
                return float(f.read())
        died = read("died")
        back = max(read(f"first-second-{k}") for k in (0, 1))
        first = max(read(f"first-first-{k}") for k in (0, 1))
        return back - died, first - started


def backends():
    import importlib.util
    return [b for b, module in (("tensorflow", "tensorflow"), ("jax", "jax")) if importlib.util.find_spec(module)]


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--worker", action="store_true")
    p.add_argument("--view", default="consistent")
    p.add_argument("--folder")
    p.add_argument("--kill-at", type=int, default=7)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--grace-periods", default="10,2", help="the launcher's --grace-period values to compare")
    p.add_argument("--write", action="store_true")
    args = p.parse_args()
    if args.worker:
        return worker(args)
    rows = []
    for backend in backends():
        for view in ("consistent", "mirrored"):
            for grace in [float(g) for g in args.grace_periods.split(",")]:
                rounds = [one_round(backend, view, args.kill_at, grace) for _ in range(args.repeats)]
                restart = statistics.median(r for r, _ in rounds)
                start = statistics.median(s for _, s in rounds)
                rows.append(f"| {backend} | {view} | {grace:g} s | {restart:.1f} s | {start:.1f} s | "
                            f"{', '.join(f'{r:.1f}' for r, _ in rounds)} |")
                print(rows[-1], flush=True)
    table = "\n".join(["| backend | view | --grace-period | death to first step after the restart (median) | "
                       "launch to first step (median) | rounds |", "|---|---|---|---|---|---|", *rows])
    print(table)
    if args.write:
        load = os.getloadavg()
        with open(os.path.join(HERE, "RESULTS_processes.md"), "a") as f:
            f.write(f"\n## Restart cost (`bench/bench_restart.py`, {time.strftime('%Y-%m-%d')})\n\n"
                    f"`--max-restarts 1`, 2 processes of 1 device, process 1 SIGKILLed at step {args.kill_at} "
                    f"of the first start; {platform.node()}, {os.cpu_count()} CPUs, load average "
                    f"{load[0]:.1f} when it ended.\n\n{table}\n")


if __name__ == "__main__":
    main()
