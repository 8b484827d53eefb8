"""Page faults per step and steps/s on 4 logical CPU devices, with glibc's malloc as it comes and with the settings
of ``backends/flowlayers_jax/host_heap.py`` (``M_MMAP_THRESHOLD`` 32 MiB, ``M_TOP_PAD`` 64 MiB):

- ``flowlayers``: flowlayers' ``fit`` (consistent view), which applies the settings when it first runs on the CPU;
- ``flowlayers, FLOWLAYERS_KEEP_HOST_HEAP=0``: the same with glibc left as it was;
- ``hand-written``: bench_jax_cpu.py's hand-written ``jax.jit`` step (waiting for the step before) as it comes;
- ``hand-written + host_heap.keep()``: the same after calling ``host_heap.keep()`` first.

    python bench/probe_jax_host_heap.py --processes 4 --write     # -> bench/RESULTS_jax_heap.md

Each case in ``--processes`` fresh processes, in turn (A1 B1 C1 D1 A2 ...); each process times 5 rounds of 20
steps after one warm-up round, and reports their median and its minor page faults per step over them.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
CASES = {"flow": ("flowlayers", {}),
         "flow_off": ("flowlayers, FLOWLAYERS_KEEP_HOST_HEAP=0", {"FLOWLAYERS_KEEP_HOST_HEAP": "0"}),
         "hand": ("hand-written", {}),
         "hand_keep": ("hand-written + host_heap.keep()", {})}
MODELS = ("lenet", "mlp")
DEVICES, ROUNDS = 4, 5


def minor_faults():
    with open("/proc/self/stat") as f:
        return int(f.read().rsplit(")", 1)[1].split()[7])


def child(case, model):
    sys.path.insert(0, str(HERE))
    import bench_jax_cpu as b

    steps = b.STEPS[model]
    x, y = b.load(steps * b.BATCH[model])
    if case.startswith("flow"):
        os.environ["FLOWLAYERS_CPU_DEVICES"] = str(DEVICES)
        run = b.flow_trainer({"contender": "flow_consistent", "model": model, "devices": DEVICES})
    else:
        if case == "hand_keep":
            from flowlayers_jax import host_heap
            host_heap.keep()
        import jax
        jax.config.update("jax_num_cpu_devices", DEVICES)
        jax.config.update("jax_enable_x64", True)       # as flowlayers' processes run
        run = b.jax_trainer({"contender": "jax_wait", "model": model, "devices": DEVICES})
    run(x, y)
    before, rounds = minor_faults(), []
    for _ in range(ROUNDS):
        t = time.perf_counter()
        run(x, y)
        rounds.append(steps / (time.perf_counter() - t))
    print(json.dumps({"steps_per_s": statistics.median(rounds),
                      "faults_per_step": (minor_faults() - before) / (ROUNDS * steps)}))


def run_child(case, model):
    env = {k: v for k, v in os.environ.items() if k != "FLOWLAYERS_KEEP_HOST_HEAP"}
    env.update(XLA_FLAGS="", PYTHONPATH=str(HERE.parent), **CASES[case][1])
    done = subprocess.run([sys.executable, __file__, "--child", case, model], capture_output=True, text=True,
                          env=env, timeout=600)
    line = next((ln for ln in done.stdout.splitlines() if ln.startswith("{")), None)
    if line is None:
        sys.exit(f"{case} {model}: no result; stderr: {done.stderr[-1500:]}")
    return json.loads(line)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--processes", type=int, default=4)
    parser.add_argument("--models", default=",".join(MODELS))
    parser.add_argument("--write", action="store_true", help="write bench/RESULTS_jax_heap.md")
    parser.add_argument("--child", nargs=2, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        return child(*args.child)
    started, models = time.time(), args.models.split(",")
    results = {(m, c): [] for m in models for c in CASES}
    for model in models:
        for _ in range(args.processes):
            for case in CASES:
                r = run_child(case, model)
                results[model, case].append(r)
                print(f"{model:6s} {case:10s} {r['steps_per_s']:6.2f} steps/s  {r['faults_per_step']:8.0f} faults/step",
                      flush=True)
    lines = ["# Page faults per step and steps/s on 4 logical CPU devices, glibc's malloc as it comes and kept", "",
             f"`python bench/probe_jax_host_heap.py --processes {args.processes} --write` "
             f"({time.strftime('%Y-%m-%d')}, {time.time() - started:.0f} s; 2-core shared VM, JAX 0.10.2, "
             f"{os.confstr('CS_GNU_LIBC_VERSION')}). Models and batches of `bench_jax_cpu.py` (LeNet at 100, the "
             "1024-wide MLP at 256, data parallel). Each case in its own fresh processes, in turn with the others; "
             f"a process's figures: the median of its {ROUNDS} rounds of 20 steps, and its minor page faults per "
             "step over them (one device's temporary buffers of a LeNet step are about 6,000 pages).", "",
             "| model | case | steps/s, median over processes | each process | page faults per step, each process |",
             "|---|---|---|---|---|"]
    for model in models:
        for case, (label, _) in CASES.items():
            rs = results[model, case]
            speeds = [r["steps_per_s"] for r in rs]
            lines.append(f"| {model} | {label} | {statistics.median(speeds):.2f} | "
                         f"{' / '.join(f'{s:.1f}' for s in speeds)} | "
                         f"{' / '.join(str(round(r['faults_per_step'])) for r in rs)} |")
    print("\n".join(lines))
    if args.write:
        (HERE / "RESULTS_jax_heap.md").write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
