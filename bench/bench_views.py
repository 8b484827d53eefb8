"""Steps per second of LeNet (seed 000: conv32-pool-conv64-pool-dense512-dense10, batch 100, NCHW)
in one device, mirrored and consistent view, on N logical CPU devices, with and without XLA.

Runs alternate (A B C A B C ...), the first epoch (tracing, compile) is excluded;
the median of the timed repeats is reported and written to bench/RESULTS_views.md.

    python bench/bench_views.py --devices 2 --images 2000 --repeats 3
"""
import argparse
import os
import platform
import statistics
import sys
import time
from pathlib import Path

parser = argparse.ArgumentParser()
parser.add_argument("--devices", type=int, default=2)
parser.add_argument("--images", type=int, default=2000)
parser.add_argument("--repeats", type=int, default=3)
parser.add_argument("--jit", action="store_true", help="also measure compile(jit_compile=True)")
args = parser.parse_args()
os.environ["FLOWLAYERS_CPU_DEVICES"] = str(args.devices)
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import numpy as np  # noqa: E402

import flowlayers as flow  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT.parent / "shared" / "data"


def lenet(jit):
    flow.clear_session()
    x = flow.Input((1, 28, 28), batch_size=100)
    cf = dict(padding="same", activation="relu", data_format="channels_first")
    h = flow.layers.Conv2D(32, 5, **cf)(x)
    h = flow.layers.MaxPool2D(2, data_format="channels_first")(h)
    h = flow.layers.Conv2D(64, 5, **cf)(h)
    h = flow.layers.MaxPool2D(2, data_format="channels_first")(h)
    h = flow.layers.Dense(512, activation="relu")(flow.layers.Flatten()(h))
    model = flow.Model(x, flow.layers.Dense(10)(h))
    model.compile(optimizer=flow.optimizers.SGD(0.1, momentum=0.9),
                  loss=flow.losses.SparseCategoricalCrossentropy(from_logits=True), jit_compile=jit)
    return model


def main():
    (xs, ys), _ = flow.data.load_mnist_arrays(DATA if DATA.exists() else None)
    xs = (xs[:args.images, None].astype(np.float32) / 255.0)
    ys = ys[:args.images].astype(np.int32)
    configs = [("one device", "mirrored", 1, False), ("mirrored", "mirrored", args.devices, False),
               ("consistent", "consistent", args.devices, False)]
    if args.jit:
        configs += [(f"{name} + XLA", view, n, True) for name, view, n, _ in configs]
    models, times = {}, {c[0]: [] for c in configs}
    for name, view, n, jit in configs:           # build + warm-up epoch (excluded)
        flow.config.set_view(view)
        flow.config.gpu_device_num(n)
        t = time.perf_counter()
        models[name] = lenet(jit)
        models[name].fit(xs[:200], ys[:200], batch_size=100, verbose=0)
        print(f"{name}: build + first steps {time.perf_counter() - t:.1f}s", flush=True)
    for _ in range(args.repeats):
        for name, view, n, jit in configs:
            flow.config.set_view(view)
            flow.config.gpu_device_num(n)
            t = time.perf_counter()
            models[name].fit(xs, ys, batch_size=100, verbose=0, shuffle=False)
            times[name].append(len(xs) / (time.perf_counter() - t))
    base = statistics.median(times["one device"])
    lines = [f"# flowlayers views: LeNet samples/s ({time.strftime('%Y-%m-%d')})", "",
             f"Machine: {platform.machine()}, {os.cpu_count()} cores; Python {platform.python_version()}; "
             f"TF {__import__('tensorflow').__version__}; {args.devices} logical CPU devices; {args.images} real "
             f"MNIST images, batch 100; median of {args.repeats} alternating runs, warm-up excluded.", "",
             "| configuration | samples/s | steps/s | ratio to one device |", "|---|---|---|---|"]
    for name in times:
        med = statistics.median(times[name])
        lines.append(f"| {name} | {med:.0f} | {med / 100:.2f} | {med / base:.2f}x |")
    text = "\n".join(lines) + "\n"
    print(text)
    (ROOT / "bench" / "RESULTS_views.md").write_text(text)


if __name__ == "__main__":
    sys.exit(main())
