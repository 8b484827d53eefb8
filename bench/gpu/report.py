"""The GPU targets of issue 21 from the JSON lines of ``bench/gpu/run.sh`` (or the older ``bench/gpu_runs/``):

    python bench/gpu/report.py bench/out/gpu             # files *flowlayers*.jsonl, *peers*.jsonl, *probe*.jsonl
    python bench/gpu/report.py bench/gpu_runs --run run5    # only the files whose names start with run5

Per case (model, batch) the median samples/s of each runner over the lines found (a round per process), then each
target as a ratio of medians and, where the rounds pair up (``flowlayers_R`` beside ``peers_R``), the median of the
rounds' own ratios: flowlayers' per-step ``fit`` against the hand-written per-step loop (>= 0.9) and Keras 3's ``fit``
with ``steps_per_execution`` 1 (>= 1.0); ``fit`` with ``steps_per_execution`` 32 against the hand-written 50-step
scan over data on the device (>= 0.7) and Keras' 32 (>= 1.0).  Then the probe's microseconds a step, if any.
"""
import glob
import json
import os
import re
import statistics
import sys

# (flowlayers' runner, the peer's runner, the least ratio the issue asks for)
TARGETS = [("flowlayers_jax", "jax", 0.9), ("flowlayers_jax", "keras_jax_spe1", 1.0),
           ("flowlayers_jax_spe32", "jax_scan50", 0.7), ("flowlayers_jax_spe32", "keras_jax_spe32", 1.0)]


def read(folder, prefix=""):
    """{kind: {round: [records]}} for kind flowlayers, peers and probe; a file's round is the number in its name
    after the kind (``flowlayers_2.jsonl``), else its name."""
    found = {"flowlayers": {}, "peers": {}, "probe": {}}
    for path in sorted(glob.glob(os.path.join(folder, f"{prefix}*.jsonl"))):
        name = os.path.basename(path)
        kind = next((k for k in found if k in name), None)
        if kind is None:
            continue
        number = re.search(rf"{kind}_(\d+)", name)
        with open(path) as f:
            records = [json.loads(line) for line in f if line.strip().startswith("{")]
        found[kind][number.group(1) if number else name] = [r for r in records if "error" not in r]
    return found


def by_case(rounds):
    """{(runner, model, batch): [samples/s, ...]} over every round, and {round: {(runner, model, batch): value}}."""
    pooled, per_round = {}, {}
    for key, records in rounds.items():
        for r in records:
            case = (r["runner"], r["model"], r["batch"])
            pooled.setdefault(case, []).append(r["samples_per_s"])
            per_round.setdefault(key, {})[case] = r["samples_per_s"]
    return pooled, per_round


def rate(value):
    return f"{value / 1e6:.2f}M" if value >= 1e6 else f"{value / 1e3:.0f}k" if value >= 1e4 else f"{value:.0f}"


def figure(values):
    if not values:
        return "-"
    mid = rate(statistics.median(values))
    return mid if len(values) == 1 else f"{mid} ({rate(min(values))}-{rate(max(values))})"


def report(found):
    flow, flow_rounds = by_case(found["flowlayers"])
    peers, peer_rounds = by_case(found["peers"])
    cases = sorted({(m, b) for _, m, b in flow}, key=lambda c: (c[0] != "lenet", c[1]))
    runners = ["flowlayers_jax", "jax", "keras_jax_spe1", "flowlayers_jax_spe32", "jax_scan50", "keras_jax_spe32"]
    lines = [f"samples/s, median (min-max) over the lines of {len(found['flowlayers'])} flowlayers and "
             f"{len(found['peers'])} peer files", "",
             "| case | " + " | ".join(runners) + " |", "|---" * (len(runners) + 1) + "|"]
    for m, b in cases:
        lines.append(f"| {m} b{b} | " + " | ".join(figure({**flow, **peers}.get((r, m, b), [])) for r in runners)
                     + " |")
    lines += ["", "| case | target | least | ratio of medians | median of paired rounds | met |", "|---" * 6 + "|"]
    paired = sorted(set(flow_rounds) & set(peer_rounds))
    for m, b in cases:
        for ours, theirs, least in TARGETS:
            a, p = flow.get((ours, m, b)), peers.get((theirs, m, b))
            if not a or not p:
                continue
            ratio = statistics.median(a) / statistics.median(p)
            pairs = [flow_rounds[k][(ours, m, b)] / peer_rounds[k][(theirs, m, b)] for k in paired
                     if (ours, m, b) in flow_rounds[k] and (theirs, m, b) in peer_rounds[k]]
            by_pairs = statistics.median(pairs) if pairs else None
            met = "yes" if min(ratio, ratio if by_pairs is None else by_pairs) >= least else "**no**"
            lines.append(f"| {m} b{b} | {ours} / {theirs} | {least} | {ratio:.2f} | "
                         f"{'-' if by_pairs is None else f'{by_pairs:.2f} ({len(pairs)})'} | {met} |")
    probes = [r for records in found["probe"].values() for r in records]
    if probes:
        lines += ["", "| probe (one process) | us a step | host share |", "|---|---|---|"]
        lines += [f"| {r['probe']} ({r['model']} b{r['batch']}) | {r['us_per_step']} | {r['host_share']} |"
                  for r in probes]
        us = {(r["probe"], r["model"], r["batch"]): r["us_per_step"] for r in probes}
        for m, b in dict.fromkeys((m, b) for _, m, b in us):
            if ("flow_fit", m, b) in us and ("hand_x32", m, b) in us:
                lines.append(f"\nfit against the hand-written step in one process, {m} b{b}: "
                             f"{us['hand_x32', m, b] / us['flow_fit', m, b]:.2f}x")
    return "\n".join(lines)


def main(argv):
    folder = argv[0] if argv else os.path.join("bench", "out", "gpu")
    prefix = argv[argv.index("--run") + 1] if "--run" in argv else ""
    found = read(folder, prefix)
    if not found["flowlayers"]:
        sys.exit(f"report.py: no *flowlayers*.jsonl in {folder!r}" + (f" starting {prefix!r}" if prefix else ""))
    print(report(found))


if __name__ == "__main__":
    main(sys.argv[1:])
