"""Per-device parameter + optimizer bytes and steps/s of tutorial 07's GPT under tensor parallelism and ZeRO.

    python bench/bench_gpt.py               # writes bench/RESULTS_gpt.md

Bytes are read back from the engine's variables (each DVariable's shards), not computed; activations are not
measured (TF on CPU reports no per-device peak).  Steps/s: median of timed windows after two warm-up steps, on
logical CPU devices that share this machine's cores, so they say what a configuration costs here, not what it
gains on GPUs; ratios are against one device in the same run.
"""
import argparse
import datetime
import os
import platform

os.environ.setdefault("FLOWLAYERS_CPU_DEVICES", "4")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")


import flowlayers as flow  # noqa: E402

from gpt_setup import HERE, add_size_arguments, batch, char_gpt, timed_steps  # noqa: E402


def configurations(model):
    """(name, devices, mesh, rules made once the mesh is in force)."""
    tp = {**flow.parallel.attention_rules(), **char_gpt.MLP_RULES}
    return [
        ("one device", 1, {}, lambda: {}),
        ("tensor parallel, model=2", 2, {"model": 2}, lambda: tp),
        ("tensor parallel, model=4", 4, {"model": 4}, lambda: tp),
        ("data x model = 2 x 2, tensor parallel", 4, {"data": 2, "model": 2}, lambda: tp),
        ("2 x 2, tensor + vocabulary parallel", 4, {"data": 2, "model": 2},
         lambda: {**tp, **flow.parallel.vocab_rules()}),
        ("ZeRO, data=2", 2, {"data": 2}, lambda: flow.parallel.zero_rules(model)),
        ("ZeRO, data=4", 4, {"data": 4}, lambda: flow.parallel.zero_rules(model)),
        ("2 x 2, ZeRO + tensor parallel", 4, {"data": 2, "model": 2},
         lambda: flow.parallel.zero_rules(model, rules=tp)),
    ]


def build(args, devices, mesh, rules):
    flow.config.set_view("consistent")
    flow.config.gpu_device_num(devices)
    flow.config.set_mesh(**mesh)
    flow.config.set_layout_rules(rules())
    flow.clear_session()
    flow.config.set_seed(0)
    model = char_gpt.gpt(args.vocab, args.seq, width=args.width, heads=args.heads, blocks=args.blocks)
    model.compile(flow.optimizers.Adam(1e-3), flow.losses.SparseCategoricalCrossentropy(from_logits=True))
    return model


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_size_arguments(parser)
    parser.add_argument("--out", default=os.path.join(HERE, "RESULTS_gpt.md"))
    args = parser.parse_args()

    feeds, y = batch(args)
    rows = []
    base_model = build(args, 1, {}, dict)
    for name, devices, mesh, rules in configurations(base_model):
        model = build(args, devices, mesh, rules)
        plan = model.parallel_plan(batch_size=args.batch)
        step, _ = timed_steps(model, feeds, y, args.steps)
        sizes = dict(plan.axes)       # a "collective" over an axis of one device moves nothing: not counted
        collectives = sum(1 for b in plan.boxing for axis, _ in b.collectives if sizes.get(axis, 2) > 1)
        rows.append((name, devices, plan.bytes_per_device, plan.logical_bytes, args.batch / step,
                     collectives))
        print(rows[-1], flush=True)
    base_bytes, base_rate = rows[0][2], rows[0][4]
    lines = [f"# GPT: per-device parameter + optimizer bytes and steps/s ({datetime.date.today()})", "",
             f"{platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}; tutorial 07's GPT: "
             f"width {args.width}, {args.heads} heads, {args.blocks} blocks, sequence {args.seq}, vocabulary "
             f"{args.vocab}, Adam; batch {args.batch}. Command: `python bench/bench_gpt.py`. Logical CPU devices "
             f"share the cores: the samples/s say what each configuration costs here, not its speed-up on GPUs.", "",
             "| configuration | devices | bytes per device | of one device's | samples/s | vs one device | "
             "collectives per step (plan) |", "|---|---|---|---|---|---|---|"]
    for name, devices, held, total, rate, collectives in rows:
        lines.append(f"| {name} | {devices} | {held:,} | {held / base_bytes:.3f} | {rate:,.0f} | "
                     f"{rate / base_rate:.2f}x | {collectives} |")
    with open(args.out, "w") as f:
        f.write("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
