"""The pipeline's bubble: tutorial 07's GPT on two stages (``stages=2``, one device each) with 1-8 micro-batches.

    python bench/bench_pipeline.py          # writes bench/RESULTS_pipeline.md

What runs: one step holds every micro-batch's forward and backward pass as independent chains that meet only in
the summed loss, and TF's executor runs whatever is ready, so stage 2 works on micro-batch k while stage 1 works
on k+1: GPipe's fill and drain, with the order inside left to the executor (not 1F1B: every micro-batch's
activations may be alive at once).  With S stages and M micro-batches of equal cost, GPipe idles a fraction
(S-1)/(M+S-1) of the devices' time.  Measured: each logical device gets one core (TF's intra-op threads set to 1,
on this 2-core machine), the same model on one device gives the work T1, and the pipeline's step time t on two
devices gives the busy fraction T1 / (2 t); the rest is bubble, copies between the stages and the micro-batches'
own overhead.
"""
import argparse
import datetime
import os
import platform

os.environ.setdefault("FLOWLAYERS_CPU_DEVICES", "2")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import tensorflow as tf  # noqa: E402

tf.config.threading.set_intra_op_parallelism_threads(1)    # one core per logical device
tf.config.threading.set_inter_op_parallelism_threads(2)

import flowlayers as flow  # noqa: E402
from gpt_setup import HERE, add_size_arguments, batch, char_gpt, timed_steps  # noqa: E402


def step_time(args, devices, stages, micro_batches, feeds, y):
    flow.config.set_view("consistent")
    flow.config.gpu_device_num(devices)
    flow.clear_session()
    flow.config.set_seed(0)
    model = char_gpt.gpt(args.vocab, args.seq, width=args.width, heads=args.heads, blocks=args.blocks,
                         stages=stages)
    model.compile(flow.optimizers.Adam(1e-3), flow.losses.SparseCategoricalCrossentropy(from_logits=True),
                  micro_batches=micro_batches)
    return timed_steps(model, feeds, y, args.steps)[0]


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_size_arguments(parser, width=256, batch=32, steps=6)
    parser.add_argument("--out", default=os.path.join(HERE, "RESULTS_pipeline.md"))
    args = parser.parse_args()
    feeds, y = batch(args)
    work = step_time(args, 1, 1, 1, feeds, y)
    rows = []
    for m in (1, 2, 4, 8):
        t = step_time(args, 2, 2, m, feeds, y)
        rows.append((m, t, work / (2 * t), 1 / (m + 1)))
        print(rows[-1], flush=True)
    lines = [f"# Pipeline: two stages, micro-batches and the bubble ({datetime.date.today()})", "",
             f"{platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}, TF intra-op threads "
             f"1 (one core per logical device); tutorial 07's GPT, width {args.width}, {args.blocks} blocks (2 per "
             f"stage; the embeddings with the first, the head with the second), sequence {args.seq}, batch "
             f"{args.batch}, Adam. Command: `python bench/bench_pipeline.py`. Median of {args.steps} steps after 2 "
             f"warm-ups. One device, the same model: {work * 1000:.0f} ms per step (T1).", "",
             "| micro-batches M | step (ms) | vs M=1 | busy T1/(2t) | idle, measured | GPipe's bubble (S-1)/(M+S-1) |",
             "|---|---|---|---|---|---|"]
    for m, t, busy, bubble in rows:
        lines.append(f"| {m} | {t * 1000:.0f} | {t / rows[0][1]:.2f} | {busy:.2f} | {1 - busy:.2f} | {bubble:.2f} |")
    with open(args.out, "w") as f:
        f.write("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
