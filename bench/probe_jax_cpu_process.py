"""Does running flowlayers' step slow the process it ran in?  The hand-written LeNet step of bench_jax_cpu.py
(waiting for the step before), timed on 4 logical CPU devices in a fresh process, against the same after another
program has run in that process first:

- ``fresh``: nothing before it;
- ``hand_first``: a second hand-written trainer built and run for one round (20 steps) first;
- ``flow_first``: flowlayers' consistent LeNet built, and its jitted step called 20 times directly (no ``fit``);
- ``--together``: instead, flowlayers' ``fit`` (consistent view) and the hand-written loop in one process, their rounds
  interleaved: the ratio of their medians there.

    python bench/probe_jax_cpu_process.py --processes 4 --write     # -> bench/RESULTS_jax_process.md

Each case in ``--processes`` processes, in turn (A1 B1 C1 A2 ...); each process times 5 rounds of 20 steps after
one warm-up round and reports their median and the CPU time of each of its threads over them.
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
CASES = ("fresh", "hand_first", "flow_first")
DEVICES, ROUNDS = 4, 5


def thread_ticks():
    """{thread id: (name, user + system clock ticks)} of this process."""
    out = {}
    for tid in os.listdir("/proc/self/task"):
        try:
            stat = open(f"/proc/self/task/{tid}/stat").read()
        except OSError:
            continue
        fields = stat[stat.rindex(")") + 2:].split()
        out[tid] = (stat[stat.index("(") + 1:stat.rindex(")")], int(fields[11]) + int(fields[12]))
    return out


def flow_first(b, x, y):
    os.environ["FLOWLAYERS_CPU_DEVICES"] = str(DEVICES)
    import jax
    import flowlayers as flow

    flow.clear_session()
    flow.config.set_backend("jax")
    flow.config.gpu_device_num(DEVICES)
    flow.config.set_mesh(data=DEVICES)
    model = b.keras_style(flow, "lenet")
    model.compile(flow.optimizers.SGD(b.LR, momentum=b.MOMENTUM),
                  flow.losses.SparseCategoricalCrossentropy(from_logits=True))
    compiled = model.trainer.step("train")
    compiled.run([x[:100], y[:100]], model.optimizer)      # builds the jitted step
    ex = compiled.executable
    (fn,) = [f for key, f in ex._fns.items() if key[0] != "steps"]
    lr, totals, number = ex._scalars(b.LR, model.optimizer.iterations + 1)
    arrays, outs = [[box.value for box in group] for group in ex._boxes], None
    for i in range(20):
        if outs is not None:
            jax.block_until_ready(outs[0])
        outs, *new = fn(*arrays, [[x[:100], y[:100]]], lr, totals, number)
        arrays, totals, number = [*new, arrays[3]], outs[-2], outs[-1]
    jax.block_until_ready(outs)


def together(b, x, y, rounds=8):
    """flowlayers' fit and the hand-written loop in one process, rounds interleaved: (fit, hand) medians."""
    os.environ["FLOWLAYERS_CPU_DEVICES"] = str(DEVICES)
    fit = b.flow_trainer({"contender": "flow_consistent", "model": "lenet", "devices": DEVICES})
    hand = b.jax_trainer({"contender": "jax_wait", "model": "lenet", "devices": DEVICES})
    runs, speeds = (fit, hand), ([], [])
    for run in runs:
        run(x, y)
    for _ in range(rounds):
        for run, out in zip(runs, speeds):
            t = time.perf_counter()
            run(x, y)
            out.append(20 / (time.perf_counter() - t))
    return [statistics.median(v) for v in speeds]


def child(case):
    sys.path.insert(0, str(HERE))
    import bench_jax_cpu as b

    x, y = b.load(20 * 100)
    if case == "together":
        fit, hand = together(b, x, y)
        return print(json.dumps({"case": case, "fit": fit, "hand": hand}))
    if case == "flow_first":
        flow_first(b, x, y)       # flowlayers asks JAX for the devices and turns on 64-bit mode
    else:
        import jax
        jax.config.update("jax_num_cpu_devices", DEVICES)
        jax.config.update("jax_enable_x64", True)       # as flowlayers' processes run
    config = {"contender": "jax_wait", "model": "lenet", "devices": DEVICES}
    if case == "hand_first":
        b.jax_trainer(config)(x, y)
    hand = b.jax_trainer(config)
    hand(x, y)
    before, rounds = thread_ticks(), []
    for _ in range(ROUNDS):
        t = time.perf_counter()
        hand(x, y)
        rounds.append(20 / (time.perf_counter() - t))
    after = thread_ticks()
    ticks = sorted((after[t][1] - before.get(t, ("", 0))[1] for t in after), reverse=True)
    print(json.dumps({"case": case, "steps_per_s": statistics.median(rounds), "rounds": rounds,
                      "busiest_threads_ticks": ticks[:8], "all_threads_ticks": sum(ticks)}))


def run_child(case):
    done = subprocess.run([sys.executable, __file__, "--child", case], capture_output=True, text=True,
                          env=dict(os.environ, XLA_FLAGS="", PYTHONPATH=str(HERE.parent)), timeout=600)
    line = next((ln for ln in done.stdout.splitlines() if ln.startswith("{")), None)
    if line is None:
        sys.exit(f"{case}: no result; stderr: {done.stderr[-1500:]}")
    return json.loads(line)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--processes", type=int, default=4)
    parser.add_argument("--write", action="store_true", help="write bench/RESULTS_jax_process.md")
    parser.add_argument("--together", action="store_true", help="fit and the hand-written loop in one process")
    parser.add_argument("--child", choices=CASES + ("together",), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        return child(args.child)
    started = time.time()
    if args.together:
        for _ in range(args.processes):
            r = run_child("together")
            print(f"one process: fit {r['fit']:.2f}, hand-written (waiting) {r['hand']:.2f} steps/s: "
                  f"{r['fit'] / r['hand']:.2f}x", flush=True)
        return
    results = {case: [] for case in CASES}
    for _ in range(args.processes):
        for case in CASES:
            r = run_child(case)
            results[case].append(r)
            print(f"{case:10s} {r['steps_per_s']:6.2f} steps/s  threads' CPU ticks {r['all_threads_ticks']} "
                  f"(busiest {r['busiest_threads_ticks'][:6]})", flush=True)
    lines = ["# The hand-written LeNet step, 4 logical CPU devices: in a fresh process, and after another program ran",
             "", f"`python bench/probe_jax_cpu_process.py --processes {args.processes} --write` "
             f"({time.strftime('%Y-%m-%d')}, {time.time() - started:.0f} s; 2-core shared VM, JAX 0.10.2). "
             "Each row: one case in its processes, in turn with the others; a process's figure is the median of "
             f"its {ROUNDS} rounds of 20 steps; CPU ticks (1/100 s) of all its threads over those rounds.", "",
             "| case | median over processes (steps/s) | each process | each process's CPU ticks |",
             "|---|---|---|---|"]
    for case in CASES:
        speeds = [r["steps_per_s"] for r in results[case]]
        each = " / ".join(f"{s:.1f}" for s in speeds)
        ticks = " / ".join(str(r["all_threads_ticks"]) for r in results[case])
        lines.append(f"| {case} | {statistics.median(speeds):.2f} | {each} | {ticks} |")
    print("\n".join(lines))
    if args.write:
        (HERE / "RESULTS_jax_process.md").write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
