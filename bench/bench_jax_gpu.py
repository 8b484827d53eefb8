"""flowlayers on the jax backend, one device (a GPU where JAX has one), on the cases of gpu_peers.py.

    MNIST_DIR=.gpu/data python bench/bench_jax_gpu.py            # what .gpu/run.sh runs on the GPU machine
    MNIST_DIR=../shared/data BENCH_STEPS=10 python bench/bench_jax_gpu.py    # a quick check on a CPU

The cases, model shapes, data and optimizer are those of ``gpu_peers.py`` (``../shared/tools``; a copy travels in
``.gpu/``): real MNIST t10k (NHWC, scaled to [0, 1]), LeNet (conv32 5x5 - maxpool - conv64 5x5 - maxpool - dense512
- dense10, truncated-normal(0.1) kernels as the Keras peer) at batch 100 and 1024, the MLP (four 1024-wide ReLU
Dense layers, then Dense(10)) at batch 1024; SGD(0.05, momentum=0.9), softmax cross-entropy from logits.

Timing follows the Keras peer of gpu_peers.py: the data cut to whole batches, one warm-up ``fit`` of one epoch
(traces and compiles; excluded, its loss read so that its steps have ended: ``fit`` returns while they may still
run), then one timed ``fit`` of as many epochs as make about ``BENCH_STEPS`` steps (200, the peers' STEPS), no
shuffling. An epoch is ``min(batches in the data, BENCH_STEPS)`` steps.

Prints one JSON line per (runner, model, batch) in gpu_peers.py's format, plus ``steps``, ``warmup_s`` and
``device``: runner ``flowlayers_jax``, and ``flowlayers_jax_spe32`` where ``Model.compile`` takes
``steps_per_execution`` (looked up at run time).  A failing case prints ``{"runner": ..., "error": ...}`` and the
others go on.  Imports no TensorFlow.

Environment: MNIST_DIR (the folder with the t10k idx files; default ../shared/data), BENCH_STEPS (200), BENCH_CASES
(e.g. ``lenet:100,mlp:1024``; default the three; ``linear`` is one Dense(10), no hidden layer), BENCH_VIEW
(consistent | mirrored; default consistent), BENCH_SPE (the steps_per_execution of the second runner; 32).
"""
import gzip
import inspect
import json
import os
import sys
import time
import traceback

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
DATA = os.environ.get("MNIST_DIR", os.path.join(HERE, "..", "..", "shared", "data"))
STEPS = int(os.environ.get("BENCH_STEPS", "200"))
SPE = int(os.environ.get("BENCH_SPE", "32"))
VIEW = os.environ.get("BENCH_VIEW", "consistent")
CASES = [(m, int(b)) for m, b in (c.split(":") for c in os.environ.get("BENCH_CASES", "lenet:100,lenet:1024,mlp:1024")
                                  .split(","))]
LR, MOMENTUM = 0.05, 0.9

os.environ["FLOWLAYERS_BACKEND"] = "jax"
import flowlayers as flow  # noqa: E402

flow.config.set_backend("jax")


def load():
    im = np.frombuffer(gzip.open(f"{DATA}/t10k-images-idx3-ubyte.gz").read(), np.uint8, offset=16)
    lb = np.frombuffer(gzip.open(f"{DATA}/t10k-labels-idx1-ubyte.gz").read(), np.uint8, offset=8)
    return (im.reshape(-1, 28, 28, 1).astype("float32") / 255.0), lb.astype("int32")


def build(model):
    """gpu_peers.py's Keras model, in flowlayers' layers."""
    x = flow.Input((28, 28, 1))
    if model == "lenet":
        init = flow.initializers.TruncatedNormal(stddev=0.1)
        h = flow.layers.Conv2D(32, 5, padding="same", activation="relu", kernel_initializer=init)(x)
        h = flow.layers.MaxPool2D(2, 2, padding="same")(h)
        h = flow.layers.Conv2D(64, 5, padding="same", activation="relu", kernel_initializer=init)(h)
        h = flow.layers.MaxPool2D(2, 2, padding="same")(h)
        h = flow.layers.Flatten()(h)
        h = flow.layers.Dense(512, activation="relu", kernel_initializer=init)(h)
    else:
        h = flow.layers.Flatten()(x)
        for _ in range({"mlp": 4, "linear": 0}[model]):     # "linear": no hidden layer (a dispatch-bound step)
            h = flow.layers.Dense(1024, activation="relu")(h)
    return flow.Model(x, flow.layers.Dense(10)(h))


def takes_steps_per_execution():
    return "steps_per_execution" in inspect.signature(flow.Model.compile).parameters


def device_name():
    try:
        import jax

        d = jax.devices()[0]
        return f"{d.platform}:{getattr(d, 'device_kind', '?')}"
    except Exception:  # noqa: BLE001 - a label only
        return "?"


def run_case(runner, model, batch, X, Y, spe=None):
    flow.clear_session()
    flow.config.set_view(VIEW)
    flow.config.gpu_device_num(1)
    m = build(model)
    extra = {} if spe is None else {"steps_per_execution": spe}
    m.compile(flow.optimizers.SGD(LR, momentum=MOMENTUM),
              flow.losses.SparseCategoricalCrossentropy(from_logits=True), **extra)
    n = (len(X) // batch) * batch
    xs, ys = X[:n], Y[:n]
    per_epoch = min(n // batch, STEPS)
    reps = max(1, STEPS // per_epoch)
    t = time.perf_counter()
    h = m.fit(xs, ys, batch_size=batch, epochs=1, steps_per_epoch=per_epoch, verbose=0, shuffle=False)  # compiles
    float(h.history["loss"][-1])        # its steps have ended: none runs on into the timed fit
    warm = time.perf_counter() - t
    t = time.perf_counter()
    h = m.fit(xs, ys, batch_size=batch, epochs=reps, steps_per_epoch=per_epoch, verbose=0, shuffle=False)
    loss = float(h.history["loss"][-1])     # a host float: every step has finished
    secs = time.perf_counter() - t
    steps = reps * per_epoch
    print(json.dumps({"runner": runner, "model": model, "batch": batch, "samples_per_s": round(batch * steps / secs),
                      "loss": round(loss, 4), "steps": steps, "warmup_s": round(warm, 2),
                      "device": device_name()}), flush=True)


def main():
    X, Y = load()
    runners = [("flowlayers_jax", None)]
    if takes_steps_per_execution():
        runners.append((f"flowlayers_jax_spe{SPE}", SPE))
    else:
        print("bench_jax_gpu: Model.compile takes no steps_per_execution: flowlayers_jax only", file=sys.stderr)
    for model, batch in CASES:
        for runner, spe in runners:
            try:
                run_case(runner, model, batch, X, Y, spe)
            except Exception as e:  # noqa: BLE001 - one case's failure must not hide the others
                traceback.print_exc()
                print(json.dumps({"runner": runner, "model": model, "batch": batch,
                                  "error": f"{type(e).__name__}: {e}"[:400]}), flush=True)


if __name__ == "__main__":
    main()
