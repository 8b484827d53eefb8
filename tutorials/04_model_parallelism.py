"""Model and hybrid parallelism: layout rules, a 2 x 2 mesh, and ``parallel_plan()``.

    python tutorials/04_model_parallelism.py            # 4 devices as a 2 x 2 mesh
    python tutorials/04_model_parallelism.py --smoke

In the mirrored view every device holds the whole model.  In the consistent
view a variable may be *split*: a model too large for one device is spread
over several.  You do not rewrite the model for that.  You name the axes of
a device mesh and say, per variable, which tensor dimension is split over
which mesh axis; the planner works out the rest -- every activation's SBP,
and the Boxing (collectives) between ops that disagree.

The model is neon's split (seed 004): convolutions data-parallel, and a
dense head that is model-parallel the Megatron way -- the first kernel split
by columns, the second by rows, so the pair needs a single all-reduce.  On a
``data x model`` mesh that is hybrid parallelism.  The plan is printed, drawn
into an image (``plan.plot``), checked against what each device really holds, and the model
is trained to the same weights as on one device.
"""
import argparse
import math
import os
import time

import numpy as np

import flowlayers as flow

OUT_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "out")

# The whole parallel strategy: regex over variable paths -> one mesh axis (or None) per tensor dim.
LAYOUT_RULES = {
    r"^hidden/kernel$": (None, "model"),      # (256, 128): columns split -> each device computes half the units
    r"^hidden/bias$": ("model",),
    r"^logits/kernel$": ("model", None),      # (128, 10): rows split -> each device a partial sum (P)
}


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--smoke", action="store_true", help="train a few steps only (a wiring check)")
    parser.add_argument("--out", default=OUT_DIR, help=f"where the picture goes; default {OUT_DIR}")
    return parser.parse_args(argv)


def build_model():
    flow.clear_session()     # the same names, hence the same initial values, in every place
    x = flow.Input((1, 8, 8))
    h = flow.layers.Conv2D(16, 3, padding="same", activation="relu", data_format="channels_first", name="conv1")(x)
    h = flow.layers.Conv2D(16, 3, padding="same", activation="relu", data_format="channels_first", name="conv2")(h)
    h = flow.layers.MaxPool2D(2, data_format="channels_first")(h)
    h = flow.layers.Flatten()(h)
    h = flow.layers.Dense(128, activation="relu", name="hidden")(h)
    model = flow.Model(x, flow.layers.Dense(10, name="logits")(h), name="neon_split")
    model.compile(optimizer=flow.optimizers.SGD(0.05, momentum=0.9),
                  loss=flow.losses.SparseCategoricalCrossentropy(from_logits=True), metrics=["accuracy"])
    return model


def place(view, mesh, rules):
    """Where the next model runs: one line each."""
    devices = math.prod(mesh.values())
    flow.config.set_view(view)
    flow.config.gpu_device_num(devices)
    flow.config.set_mesh(**mesh)
    flow.config.set_layout_rules(rules)


def _sbp(nd):
    return "(" + ", ".join(map(repr, nd)) + ")"


def main(argv=None):
    args = parse_args(argv)
    start = time.perf_counter()
    (x, y), (x_test, y_test) = flow.data.load_digits()
    if args.smoke:
        x, y = x[:256], y[:256]
    epochs = 1 if args.smoke else 5

    # 1. The mesh and the rules.  Nothing else changes: build_model is plain.
    place("consistent", {"data": 2, "model": 2}, LAYOUT_RULES)
    model = build_model()
    model.summary()          # output SBPs per layer, and parameters held per device

    # 2. The plan: every variable (and optimizer slot) with its SBP and the shard
    #    shape the engine reports, and every Boxing with its bytes per step.
    plan = model.parallel_plan(batch_size=64)
    print(plan)
    for path in ("hidden/kernel", "logits/kernel"):
        v = plan.variables[path]
        print(f"{path}: logical {v.logical_shape}, sbp {_sbp(v.sbp)}, each device holds {v.shard_shape} "
              f"({v.bytes_per_device:,} bytes)")
    all_reduces = [b for b in plan.boxing if b.phase == "forward"
                   and any(a == "model" and kind == "all-reduce" for a, kind in b.collectives)]
    print(f"forward all-reduces over 'model': {len(all_reduces)} "
          f"({', '.join(f'{b.producer} -> {b.consumer}' for b in all_reduces)})")
    # The picture: the mesh, and for each weight which device holds which block.
    picture = os.path.join(args.out, "04_parallel_plan.png")
    try:
        print(f"picture of the plan: {plan.plot(picture, variables=[w.path for w in model.weights])}")
    except flow.ConfigError as e:       # matplotlib is not installed: the message says what to install
        print(f"picture: skipped ({e})")

    # 3. Train it, and the same model on one device; after an epoch the weights
    #    agree (tutorial 02 says why the comparison is made early).
    model.fit(x, y, batch_size=64, epochs=1, verbose=2)
    hybrid = model.get_weights()
    place("mirrored", {"data": 1}, {})
    reference = build_model()
    reference.fit(x, y, batch_size=64, epochs=1, verbose=0)
    diff = max(float(np.abs(a - b).max()) for a, b in zip(hybrid, reference.get_weights()))
    print(f"2 x 2 hybrid vs one device after one epoch: max |w - w(1 device)| {diff:.2e}")

    # One line puts the mesh back in force; the same model object trains on there.
    place("consistent", {"data": 2, "model": 2}, LAYOUT_RULES)
    model.fit(x, y, batch_size=64, epochs=epochs, initial_epoch=1, verbose=0)
    _, accuracy = model.evaluate(x_test, y_test, batch_size=128, verbose=0)
    print(f"test accuracy on the 2 x 2 mesh after {epochs} epoch(s): {accuracy:.4f}")

    # 4. What other layouts of the same 4 devices would cost, from their plans.
    print(f"{'mesh':<18} {'rules':<10} {'bytes held per device':>22} {'Boxing bytes per step':>22}")
    for mesh, rules in (({"data": 4}, {}), ({"data": 2, "model": 2}, LAYOUT_RULES),
                        ({"data": 1, "model": 4}, LAYOUT_RULES)):
        place("consistent", mesh, rules)
        p = build_model().parallel_plan(batch_size=64)
        name = " x ".join(f"{a}={n}" for a, n in mesh.items())
        print(f"{name:<18} {'split' if rules else 'none':<10} {p.bytes_per_device:>22,} "
              f"{p.comm_bytes_per_step:>22,.0f}")
    print(f"done in {time.perf_counter() - start:.1f}s")
    return diff


if __name__ == "__main__":
    main()
