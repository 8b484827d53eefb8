"""Peak memory and step time of tutorial 07's GPT with and without ``flow.recompute`` around each block.

    python bench/bench_recompute.py         # writes bench/RESULTS_recompute.md

Each configuration trains in a fresh process (a process's peak resident memory only grows), which reports its
peak resident set after two warm-up steps and after the timed steps; the difference from a run that only
built and compiled the same model is what training added: activations, gradients, optimizer state.  TF on CPU
has no per-device allocator statistics, so this is the host process's memory, all logical devices together.
Activations here: 8 blocks, width 256, a batch of 32 sequences of 256 characters.
"""
import argparse
import datetime
import json
import os
import platform
import resource
import subprocess
import sys

from gpt_setup import HERE, add_size_arguments

CONFIGURATIONS = [("one device", 1, {}), ("data=2", 2, {"data": 2})]


def child(args):
    os.environ["FLOWLAYERS_CPU_DEVICES"] = str(args.devices)
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    import flowlayers as flow
    from gpt_setup import batch, char_gpt, timed_steps
    flow.config.set_view("consistent")
    flow.config.gpu_device_num(args.devices)
    flow.config.set_mesh(**json.loads(args.mesh))
    flow.config.set_seed(0)
    model = char_gpt.gpt(args.vocab, args.seq, width=args.width, heads=args.heads, blocks=args.blocks,
                         recompute=args.recompute)
    model.compile(flow.optimizers.Adam(1e-3), flow.losses.SparseCategoricalCrossentropy(from_logits=True))
    feeds, labels = batch(args)
    model.predict_on_batch(feeds)           # variables made, one forward program compiled
    built = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    step, losses = timed_steps(model, feeds, labels, args.steps)
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    print(json.dumps({"trained_mb": (peak - built) / 1024, "step_s": step, "losses": losses}))


def run(args, devices, mesh, recompute):
    sizes = [f"--{k}={getattr(args, k)}" for k in ("width", "heads", "blocks", "seq", "vocab", "batch", "steps")]
    cmd = [sys.executable, __file__, "--child", "--devices", str(devices), "--mesh", json.dumps(mesh), *sizes] + (
        ["--recompute"] if recompute else [])
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--child", action="store_true")
    parser.add_argument("--devices", type=int, default=1)
    parser.add_argument("--mesh", default="{}")
    parser.add_argument("--recompute", action="store_true")
    add_size_arguments(parser, width=256, blocks=8, seq=256, batch=32, steps=3)
    parser.add_argument("--out", default=os.path.join(HERE, "RESULTS_recompute.md"))
    args = parser.parse_args()
    if args.child:
        return child(args)
    rows = []
    for name, devices, mesh in CONFIGURATIONS:
        kept, again = run(args, devices, mesh, False), run(args, devices, mesh, True)
        assert max(abs(a - b) for a, b in zip(kept["losses"], again["losses"])) < 1e-5, (kept, again)
        rows.append((name, kept, again))
        print(rows[-1], flush=True)
    lines = [f"# Activation recomputation: memory and time ({datetime.date.today()})", "",
             f"{platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}; tutorial 07's GPT: "
             f"width {args.width}, {args.blocks} blocks, sequence {args.seq}, batch {args.batch}, Adam; each block in "
             f"`flow.recompute()` or not. Command: `python bench/bench_recompute.py`. Memory: peak resident set "
             f"growth from training (after the model was built and a forward program compiled), one fresh process "
             f"per row; time: median of {args.steps} steps after 2 warm-ups. The losses of the two runs agree "
             f"within 1e-5 (checked).", "",
             "| configuration | kept: MB | recomputed: MB | ratio | kept: s/step | recomputed: s/step | ratio |",
             "|---|---|---|---|---|---|---|"]
    for name, kept, again in rows:
        lines.append(f"| {name} | {kept['trained_mb']:,.0f} | {again['trained_mb']:,.0f} | "
                     f"{again['trained_mb'] / kept['trained_mb']:.2f} | {kept['step_s']:.3f} | {again['step_s']:.3f} | "
                     f"{again['step_s'] / kept['step_s']:.2f} |")
    with open(args.out, "w") as f:
        f.write("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
