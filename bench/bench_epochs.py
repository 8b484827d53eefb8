"""Step time over many epochs of one process, where a one-epoch figure may catch a full garbage collection.

    FLOWLAYERS_CPU_DEVICES=2 python bench/bench_epochs.py [--model deep] [--epochs 12] [--face job|keras]

Builds the model of bench/contenders.py on 2 logical devices in the consistent view, takes two steps, then times
each of ``--epochs`` epochs of 10 steps of 100 images and prints ms per step for each and their mean.
"""
import argparse
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import contenders  # noqa: E402


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default="deep")
    parser.add_argument("--epochs", type=int, default=12)
    parser.add_argument("--face", default="job", choices=("job", "keras"))
    args = parser.parse_args()
    spec, shape = contenders.MODELS[args.model]
    cls = contenders.FlowJob if args.face == "job" else contenders.FlowKeras
    model = cls(spec, shape, 2, "consistent", {}, {})
    rng = np.random.default_rng(0)
    x = rng.random((1000,) + tuple(shape), dtype=np.float32)
    y = rng.integers(0, 10, 1000).astype(np.int32)
    model.step(x[:100], y[:100])
    model.step(x[:100], y[:100])
    times = []
    for _ in range(args.epochs):
        start = time.perf_counter()
        model.epoch(x, y)
        times.append((time.perf_counter() - start) * 100)
    print("ms/step", " ".join(f"{t:.1f}" for t in times), f"mean {sum(times) / len(times):.1f}")


if __name__ == "__main__":
    main()
