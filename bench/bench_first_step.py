"""Time to the first step: flowlayers against Keras 3 on the same engine, each in a fresh process.

    python bench/bench_first_step.py                         # 3 rounds of every case, prints the table
    python bench/bench_first_step.py --rounds 5 --write      # ... and writes bench/RESULTS_first_step.md
    python bench/bench_first_step.py --engines jax --models lenet --rounds 1     # a quick look
    python bench/bench_first_step.py --phases                # flowlayers' first step split into its phases

A case is (engine, model).  Runners: ``flowlayers`` (its backend named by the engine, one device, consistent view),
``flowlayers_mirrored`` (one device, mirrored view; ``--mirrored``) and ``keras`` (Keras 3 with ``KERAS_BACKEND``
set to the engine, one device, its defaults: ``jit_compile="auto"``).  Each measurement is one fresh Python process
(``--worker``); the runners of a case alternate within a round (flowlayers, keras, flowlayers, keras ...), so load
from elsewhere falls on all alike.  A worker times

- ``import``: importing the framework and its engine (``import flowlayers`` + ``import jax``/``tensorflow``;
  ``import keras`` imports its backend's engine itself);
- ``first step``: from the first layer built, through ``compile``, to the end of a ``fit`` of one batch (epochs=1,
  verbose 0, shuffle on, random data): tracing, planning, lowering, the engine's compile and the step itself.

with the wall clock and with the CPU time of its own process (user + sys of every thread, ``RUSAGE_SELF``); the
parent also reads the CPU time of the whole process (``RUSAGE_CHILDREN``).  On a shared host the CPU time is the
steadier figure.  Medians over the rounds; ratios are flowlayers / Keras from the same run.

Models (the same builder serves both APIs, names as ``../shared/tools/gpu_models.py``):

- ``gpt``: gpu_models.py's GPT at its ``GM_SMALL=1`` sizes: vocab 64, seq 16, width 32, 2 heads, 1 block, batch 4,
  Adam(3e-4), sparse cross-entropy from logits;
- ``resnet``: gpu_models.py's ResNet-18 (four stages of two blocks), CPU-sized: input 16x16x3, widths 8-16-32-64,
  batch 8, SGD(0.05, momentum 0.9);
- ``lenet``: MNIST shape 28x28x1, conv32 5x5 - pool - conv64 5x5 - pool - dense512 - dense10, batch 100,
  SGD(0.1, momentum 0.9) (bench/contenders.py's);
- ``tutorial02``: tutorials/02_consistent_vs_mirrored.py's ``build_model``: input 1x8x8 (channels first), conv16
  3x3 - pool - dense64 - dense10, batch 64, SGD(0.05, momentum 0.9), accuracy metric.
"""
import argparse
import json
import os
import platform
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
MODELS = ("gpt", "resnet", "lenet", "tutorial02")
ENGINES = ("jax", "tensorflow")


# Worker ------------------------------------------------------------------------------------------------------
def cpu_self():
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def gpt(api, vocab, seq, width, heads, blocks):
    L = api.layers
    ids, pos = api.Input((seq,), dtype="int32", name="ids"), api.Input((seq,), dtype="int32", name="positions")
    h = L.Embedding(vocab, width, name="tok")(ids) + L.Embedding(seq, width, name="pos")(pos)
    for b in range(blocks):
        a = L.LayerNormalization(name=f"b{b}_n1")(h)
        h = h + L.MultiHeadAttention(heads, width // heads, name=f"b{b}_attn")(a, a, use_causal_mask=True)
        m = L.Dense(4 * width, activation="gelu", name=f"b{b}_in")(L.LayerNormalization(name=f"b{b}_n2")(h))
        h = h + L.Dense(width, name=f"b{b}_out")(m)
    return api.Model([ids, pos], L.Dense(vocab, name="head")(L.LayerNormalization(name="fn")(h)))


def resnet18(api, shape, classes, widths):
    L = api.layers

    def block(x, f, s, n):
        h = L.Conv2D(f, 3, strides=s, padding="same", use_bias=False, name=f"{n}_c1")(x)
        h = L.Activation("relu")(L.BatchNormalization(name=f"{n}_bn1")(h))
        h = L.BatchNormalization(name=f"{n}_bn2")(L.Conv2D(f, 3, padding="same", use_bias=False, name=f"{n}_c2")(h))
        if s != 1 or x.shape[-1] != f:
            x = L.BatchNormalization(name=f"{n}_pbn")(L.Conv2D(f, 1, strides=s, use_bias=False, name=f"{n}_p")(x))
        return L.Activation("relu")(L.add([x, h]))
    inp = api.Input(shape)
    h = L.Activation("relu")(L.BatchNormalization(name="stem_bn")(
        L.Conv2D(widths[0], 3, padding="same", use_bias=False, name="stem")(inp)))
    for i, f in enumerate(widths):
        for j in range(2):
            h = block(h, f, 2 if (j == 0 and i > 0) else 1, f"s{i}b{j}")
    return api.Model(inp, L.Dense(classes, name="head")(L.GlobalAveragePooling2D()(h)))


def lenet(api):
    L = api.layers
    x = api.Input((28, 28, 1))
    h = L.MaxPool2D(2)(L.Conv2D(32, 5, padding="same", activation="relu", name="conv1")(x))
    h = L.MaxPool2D(2)(L.Conv2D(64, 5, padding="same", activation="relu", name="conv2")(h))
    h = L.Dense(512, activation="relu", name="fc1")(L.Flatten()(h))
    return api.Model(x, L.Dense(10, name="out")(h))


def tutorial02(api):
    L = api.layers
    x = api.Input((1, 8, 8))
    h = L.Conv2D(16, 3, padding="same", activation="relu", data_format="channels_first")(x)
    h = L.MaxPool2D(2, data_format="channels_first")(h)
    h = L.Dense(64, activation="relu")(L.Flatten()(h))
    return api.Model(x, L.Dense(10)(h))


def build(api, name, rng):
    """(model compiled, x, y, batch) of ``name`` in ``api`` (flowlayers or keras)."""
    loss = api.losses.SparseCategoricalCrossentropy(from_logits=True)
    metrics = None
    if name == "gpt":
        vocab, seq, batch = 64, 16, 4
        model = gpt(api, vocab, seq, 32, 2, 1)
        ids = rng.integers(0, vocab, (batch, seq)).astype("int32")
        x, y = [ids, np.broadcast_to(np.arange(seq, dtype="int32"), ids.shape).copy()], np.roll(ids, -1, 1)
        optimizer = api.optimizers.Adam(3e-4)
    elif name == "resnet":
        shape, batch = (16, 16, 3), 8
        model = resnet18(api, shape, 10, (8, 16, 32, 64))
        x, y = rng.standard_normal((batch,) + shape).astype("float32"), rng.integers(0, 10, batch).astype("int32")
        optimizer = api.optimizers.SGD(0.05, momentum=0.9)
    elif name == "lenet":
        batch = 100
        model = lenet(api)
        x, y = rng.random((batch, 28, 28, 1)).astype("float32"), rng.integers(0, 10, batch).astype("int32")
        optimizer = api.optimizers.SGD(0.1, momentum=0.9)
    else:
        batch = 64
        model = tutorial02(api)
        x, y = rng.random((batch, 1, 8, 8)).astype("float32"), rng.integers(0, 10, batch).astype("int32")
        optimizer, metrics = api.optimizers.SGD(0.05, momentum=0.9), ["accuracy"]
    model.compile(optimizer=optimizer, loss=loss, metrics=metrics)
    return model, x, y, batch


def worker(runner, engine, model_name, phases):
    c0, t0 = cpu_self(), time.perf_counter()
    if runner.startswith("flowlayers"):
        os.environ["FLOWLAYERS_BACKEND"] = engine
        import flowlayers as api
        __import__(engine)
        api.config.set_backend(engine)
        api.config.gpu_device_num(1)
        api.config.set_view("mirrored" if runner == "flowlayers_mirrored" else "consistent")
        api.config.set_seed(0)
    else:
        os.environ["KERAS_BACKEND"] = engine
        import keras as api
        api.utils.set_random_seed(0)
    c1, t1 = cpu_self(), time.perf_counter()
    clock = None
    if phases:
        import phase_clock as clock     # bench/phase_clock.py: wraps flowlayers' phases with timers
        clock.install(engine)
    model, x, y, batch = build(api, model_name, np.random.default_rng(0))
    history = model.fit(x, y, batch_size=batch, epochs=1, verbose=0)
    loss = float(history.history["loss"][-1])
    c2, t2 = cpu_self(), time.perf_counter()
    out = {"runner": runner, "engine": engine, "model": model_name, "import_s": t1 - t0, "import_cpu_s": c1 - c0,
           "first_step_s": t2 - t1, "first_step_cpu_s": c2 - c1, "loss": loss}
    if clock is not None:
        out["phases"] = clock.report()
    print("@bench " + json.dumps(out), flush=True)


# Parent ------------------------------------------------------------------------------------------------------
def measure(runner, engine, model, phases=False, before=None):
    """One fresh worker process; ``flowlayers_before`` runs flowlayers from the tree ``before`` (an older
    checkout) instead of this one."""
    root = Path(before) if runner == "flowlayers_before" else ROOT
    env = {k: v for k, v in os.environ.items() if k not in ("FLOWLAYERS_BACKEND", "KERAS_BACKEND", "XLA_FLAGS",
                                                            "FLOWLAYERS_CPU_DEVICES",
                                                            "FLOWLAYERS_COMPILATION_CACHE")}
    env["PYTHONPATH"] = os.pathsep.join([str(HERE), str(root), str(root / "backends"), env.get("PYTHONPATH", "")])
    env["TF_CPP_MIN_LOG_LEVEL"] = "2"
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    cmd = [sys.executable, str(Path(__file__).resolve()), "--worker", runner.replace("_before", ""), engine, model] + \
        (["--phases"] if phases else [])
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=900)
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    lines = [line for line in proc.stdout.splitlines() if line.startswith("@bench ")]
    if proc.returncode or not lines:
        raise RuntimeError(f"{' '.join(cmd)} failed ({proc.returncode}):\n{proc.stdout[-3000:]}\n"
                           f"{proc.stderr[-3000:]}")
    out = json.loads(lines[-1][len("@bench "):])
    out["runner"] = runner
    out["process_s"] = wall
    out["process_cpu_s"] = (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime)
    return out


def loadavg():
    return subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()


def median(values):
    return statistics.median(values) if values else float("nan")


FIELDS = ("import_s", "import_cpu_s", "first_step_s", "first_step_cpu_s", "process_s", "process_cpu_s")


def table(results, runners):
    """Markdown: per case, each runner's medians, then flowlayers / keras."""
    head = "| engine | model | runner | import s (cpu) | first step s (cpu) | process s (cpu) | loss |"
    rows = [head, "|" + "---|" * 7]
    for (engine, model), by_runner in results.items():
        med = {r: {f: median([m[f] for m in by_runner[r]]) for f in FIELDS} for r in runners if by_runner.get(r)}
        for r in runners:
            if r not in med:
                continue
            m, loss = med[r], by_runner[r][0]["loss"]
            rows.append(f"| {engine} | {model} | {r} | {m['import_s']:.2f} ({m['import_cpu_s']:.2f}) | "
                        f"{m['first_step_s']:.2f} ({m['first_step_cpu_s']:.2f}) | {m['process_s']:.2f} "
                        f"({m['process_cpu_s']:.2f}) | {loss:.4f} |")
        if "keras" in med:
            for r in runners:
                if r != "keras" and r in med:
                    m, k = med[r], med["keras"]
                    rows.append(f"| {engine} | {model} | **{r} / keras** | {m['import_s'] / k['import_s']:.2f}x "
                                f"({m['import_cpu_s'] / k['import_cpu_s']:.2f}x) | **{m['first_step_s'] / k['first_step_s']:.2f}x** "
                                f"(**{m['first_step_cpu_s'] / k['first_step_cpu_s']:.2f}x**) | "
                                f"{m['process_s'] / k['process_s']:.2f}x ({m['process_cpu_s'] / k['process_cpu_s']:.2f}x) | |")
    return "\n".join(rows)


def phase_table(measurements):
    """Markdown: flowlayers' first step by phase (median seconds over the rounds, wall and CPU)."""
    names = []
    for m in measurements:
        for name in m["phases"]:
            if name not in names:
                names.append(name)
    rows = ["| engine | model | " + " | ".join(names) + " | first step |", "|" + "---|" * (len(names) + 3)]
    cases = {}
    for m in measurements:
        cases.setdefault((m["engine"], m["model"]), []).append(m)
    for (engine, model), ms in cases.items():
        cells = []
        for name in names:
            wall = median([m["phases"].get(name, [0, 0])[0] for m in ms])
            cpu = median([m["phases"].get(name, [0, 0])[1] for m in ms])
            cells.append(f"{wall:.2f} ({cpu:.2f})")
        cells.append(f"{median([m['first_step_s'] for m in ms]):.2f} ({median([m['first_step_cpu_s'] for m in ms]):.2f})")
        rows.append(f"| {engine} | {model} | " + " | ".join(cells) + " |")
    return "\n".join(rows)


def versions():
    code = ("import importlib.metadata as m\ndef v(*names):\n    for n in names:\n        try:\n"
            "            return m.version(n)\n        except m.PackageNotFoundError:\n            pass\n"
            "print(v('jax'), v('tensorflow', 'tensorflow_cpu'), v('keras'))")
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True).stdout.strip()


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--worker", nargs=3, metavar=("RUNNER", "ENGINE", "MODEL"), help=argparse.SUPPRESS)
    parser.add_argument("--phases", action="store_true", help="flowlayers only: time its phases (no keras)")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--engines", default=",".join(ENGINES))
    parser.add_argument("--models", default=",".join(MODELS))
    parser.add_argument("--mirrored", action="store_true", help="also flowlayers in the mirrored view")
    parser.add_argument("--before", metavar="DIR", help="also flowlayers from the tree DIR (an older checkout: "
                                                           "`git archive REV | tar -x -C DIR`), on the jax engine")
    parser.add_argument("--write", action="store_true", help="write the table to bench/RESULTS_first_step.md "
                                                              "(the part between its bench markers)")
    args = parser.parse_args()
    if args.worker:
        return worker(*args.worker, args.phases)
    engines, models = args.engines.split(","), args.models.split(",")
    runners = ["flowlayers"] if args.phases else ["flowlayers", "keras"] + (["flowlayers_mirrored"] if args.mirrored
                                                                            else [])
    loads, results, started = [loadavg()], {}, time.perf_counter()
    print(loads[0], flush=True)
    for r in range(args.rounds):
        for engine in engines:
            for model in models:
                order = (["flowlayers_before"] if args.before and engine == "jax" else []) + runners
                order = order if r % 2 == 0 else order[::-1]
                for runner in order:
                    m = measure(runner, engine, model, args.phases, args.before)
                    results.setdefault((engine, model), {}).setdefault(runner, []).append(m)
                    print(json.dumps({k: (round(v, 3) if isinstance(v, float) else v) for k, v in m.items()}),
                          flush=True)
        loads.append(loadavg())
        print(loads[-1], flush=True)
    command = "python bench/bench_first_step.py " + " ".join(sys.argv[1:])
    text = table(results, (["flowlayers_before"] if args.before else []) + runners) if not args.phases else \
        phase_table([m for rs in results.values() for ms in rs.values() for m in ms])
    text = (f"Command: `{command}` ({args.rounds} rounds, {time.perf_counter() - started:.0f} s)\n"
            f"Host: {platform.processor() or platform.machine()}, {os.cpu_count()} CPUs; jax, tensorflow, keras: "
            f"{versions()}\nLoad (`uptime`) before and after each round:\n\n" +
            "\n".join(f"    {line}" for line in loads) + "\n\n" + text)
    print(text)
    if args.write:
        path = HERE / "RESULTS_first_step.md"
        path.write_text((path.read_text() if path.exists() else "") + "\n" + text + "\n")


if __name__ == "__main__":
    main()
