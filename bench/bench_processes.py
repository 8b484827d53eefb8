"""Two processes of 2 devices against one process of 4 devices, on the same host: steps/s of ``fit``.

    python bench/bench_processes.py                 # prints the table
    python bench/bench_processes.py --write         # ... and writes bench/RESULTS_processes.md
    python bench/bench_processes.py --smoke         # one small round: keeps it working

For each backend installed and each view, the same worker script runs as one process with 4 logical CPU devices
and as 2 processes x 2 devices started by ``python -m flowlayers.launch``; the two runs alternate, ``--repeats``
times.  A worker trains the model once to compile (excluded), then ``--rounds`` timed rounds of ``--steps`` steps of
``fit``; it reports the median round.  The table gives medians over the repeats and their ratio (2 x 2 over 1 x 4):
on one host, what the engine's cross-process collectives (gRPC for TensorFlow, gloo over loopback for JAX) cost
against its in-process ones.  Model: an MLP 784-512-512-10, batch 256, SGD with momentum, random data.

The second table times ``save_weights`` of a model of 4 x 2048 x 2048 float32 kernels with Adam's slots (about
200 MB written), median of 3 saves: every process reads the whole values (a collective gather) and process 0
writes them once, against one process writing what it holds.
"""
import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))


def worker(args):
    import numpy as np

    import flowlayers as flow

    flow.config.gpu_device_num(args.devices)
    flow.config.set_view(args.view)
    rng = np.random.default_rng(0)
    x = rng.normal(size=(args.steps * args.batch, 784)).astype(np.float32)
    y = rng.integers(0, 10, size=len(x)).astype(np.int32)
    model = flow.Sequential([flow.layers.Dense(512, activation="relu", input_shape=(784,)),
                             flow.layers.Dense(512, activation="relu"), flow.layers.Dense(10)])
    model.compile(flow.optimizers.SGD(0.01, momentum=0.9),
                  flow.losses.SparseCategoricalCrossentropy(from_logits=True))
    model.fit(x, y, batch_size=args.batch, epochs=1, verbose=0, shuffle=False)     # compiles
    rounds = []
    for _ in range(args.rounds):
        t0 = time.perf_counter()
        model.fit(x, y, batch_size=args.batch, epochs=1, verbose=0, shuffle=False)
        model.get_weights()         # the steps have run
        rounds.append(args.steps / (time.perf_counter() - t0))
    if flow.env.process_index() == 0:
        print("RESULT " + json.dumps({"steps_per_s": statistics.median(rounds)}), flush=True)
    if args.checkpoint:
        saving(args, flow, np)


def saving(args, flow, np):
    """Seconds per ``save_weights`` of a 4 x 2048 x 2048 model with Adam's slots."""
    import tempfile

    flow.clear_session()
    model = flow.Sequential([flow.layers.Dense(2048, input_shape=(2048,))] +
                            [flow.layers.Dense(2048) for _ in range(3)])
    model.compile(flow.optimizers.Adam(1e-3), flow.losses.MeanSquaredError())
    x = np.zeros((8 * args.devices, 2048), np.float32)
    model.fit(x, x, batch_size=len(x), epochs=1, verbose=0)
    where = os.environ.get("BENCH_CKPT_DIR") or tempfile.gettempdir()
    times = []
    for k in range(3):
        t0 = time.perf_counter()
        model.save_weights(os.path.join(where, "bench_processes_ckpt"))
        times.append(time.perf_counter() - t0)
    if flow.env.process_index() == 0:
        print("SAVE " + json.dumps({"seconds": statistics.median(times)}), flush=True)


def measure(backend, view, processes, args, checkpoint=False):
    devices = 4 // processes
    cmd = [os.path.abspath(__file__), "--worker", "--view", view, "--devices", str(devices), "--steps",
           str(args.steps), "--rounds", str(args.rounds), "--batch", str(args.batch)] + \
        (["--checkpoint"] if checkpoint else [])
    cmd = ([sys.executable, "-m", "flowlayers.launch", "--processes", str(processes), "--devices-per-process",
            str(devices)] if processes > 1 else [sys.executable]) + cmd
    env = dict(os.environ, FLOWLAYERS_BACKEND=backend, FLOWLAYERS_CPU_DEVICES=str(devices), TF_CPP_MIN_LOG_LEVEL="3")
    r = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=1200)
    lines = [line for line in r.stdout.splitlines() if "RESULT " in line]
    saves = [line for line in r.stdout.splitlines() if "SAVE " in line]
    if r.returncode or not lines or (checkpoint and not saves):
        raise RuntimeError(f"{backend} {view} {processes} process(es) failed:\n{(r.stdout + r.stderr)[-3000:]}")
    speed = json.loads(lines[0].split("RESULT ", 1)[1])["steps_per_s"]
    return (speed, json.loads(saves[0].split("SAVE ", 1)[1])["seconds"]) if checkpoint else speed


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--worker", action="store_true")
    p.add_argument("--view", default="consistent")
    p.add_argument("--devices", type=int, default=4)
    p.add_argument("--steps", type=int, default=30)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--batch", type=int, default=256)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--backends", default="tensorflow,jax")
    p.add_argument("--smoke", action="store_true")
    p.add_argument("--write", action="store_true")
    p.add_argument("--checkpoint", action="store_true", help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.worker:
        return worker(args)
    if args.smoke:
        args.steps, args.rounds, args.repeats = 3, 1, 1
    rows, saves = [], []
    for backend in args.backends.split(","):
        for view in ("consistent", "mirrored"):
            got = {1: [], 2: []}
            for _ in range(args.repeats):
                for processes in (1, 2):
                    got[processes].append(measure(backend, view, processes, args))
            one, two = statistics.median(got[1]), statistics.median(got[2])
            rows.append(f"| {backend} | {view} | {one:.1f} | {two:.1f} | {two / one:.2f}x |")
            print(rows[-1], flush=True)
        one, two = measure(backend, "consistent", 1, args, True)[1], measure(backend, "consistent", 2, args, True)[1]
        saves.append(f"| {backend} | {one:.2f} | {two:.2f} | {two / one:.2f}x |")
        print(saves[-1], flush=True)
    table = "\n".join(["| backend | view | 1 process x 4 devices (steps/s) | 2 processes x 2 devices (steps/s) | "
                       "ratio |", "|---|---|---|---|---|"] + rows + [
        "", "| backend | save_weights, 1 process x 4 devices (s) | 2 processes x 2 devices (s) | ratio |",
        "|---|---|---|---|"] + saves)
    header = (f"# Processes: 2 x 2 devices against 1 x 4 on one host\n\n`python bench/bench_processes.py --write`, "
              f"{time.strftime('%Y-%m-%d')}, {platform.node()}, {os.cpu_count()} cores; MLP 784-512-512-10, batch "
              f"{args.batch}, {args.steps} steps a round, median of {args.rounds} rounds per run and of "
              f"{args.repeats} runs.\n\n")
    print(table)
    if args.write and not args.smoke:
        with open(os.path.join(HERE, "RESULTS_processes.md"), "w") as f:
            f.write(header + table + "\n")


if __name__ == "__main__":
    main()
