"""Where a small step's time goes when it is fed from the host step by step: flowlayers on the jax backend against
the hand-written ``jax.jit`` step of gpu_peers.py, and that step changed one property at a time towards what
flowlayers' step is, all in one process, interleaved over rounds.

    MNIST_DIR=.gpu/data python bench/probe_jax_dispatch.py                 # on the GPU machine (one device)
    MNIST_DIR=../shared/data PROBE_STEPS=100 python bench/probe_jax_dispatch.py    # a quick check on a CPU

Contenders (LeNet, batch 100 unless PROBE_CASE says otherwise, e.g. ``mlp:1024``, or ``linear:16``: one Dense(10)
on the flat image, a step of almost no arithmetic, where a CPU shows the host's cost a step; SGD(0.05, momentum 0.9)):

- ``hand_x32``: gpu_peers.py's step (no donation, no shardings, the batch as numpy), run as that script runs it,
  with ``jax_enable_x64`` off (flowlayers' jax backend turns it on);
- ``hand``: the same with ``jax_enable_x64`` on;
- ``hand_donated``: the same, its weights and momenta donated;
- ``hand_sharded``: the same, donated, with ``in_shardings`` over a one-device mesh (as flowlayers' step has);
- ``hand_flowlike``: the same, also taking the rate and step number as device scalars and returning the loss's
  sum and the next step number (what flowlayers' step takes and returns);
- ``flow_jit``: flowlayers' jitted step function itself called in a loop, as the hand-written ones are;
- ``flow_call``: flowlayers' compiled step called in a loop (``Compiled.run``) on the batch's rows, fit's loop
  left out;
- ``flow_fit``: ``model.fit`` (verbose 0, no shuffling): on a GPU each step takes its rows from the training
  arrays kept on the device, its row numbers made there (``takes_rows``);
- ``flow_fit_rows`` / ``flow_fit_fed``: the same, every step taking its rows on the device / fed them from the
  host, whatever the platform.

Prints per contender the median samples/s over ``PROBE_ROUNDS`` rounds (3) of ``PROBE_STEPS`` steps (600) and the
host's share (time until the loop has dispatched its last step over the time until that step ends), one JSON line
each; then (``PROBE_PROFILE=1``, the default) fit's 20 most expensive functions by own time, on stderr.  With
``PROBE_HLO=folder``, the compiled programs of ``hand_flowlike`` and flowlayers' step are written there.
"""
import cProfile
import io
import json
import os
import pstats
import statistics
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench_jax_gpu as bench  # noqa: E402  (sets the jax backend)
import hand_jax  # noqa: E402
import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
from jax.sharding import Mesh, NamedSharding, PartitionSpec  # noqa: E402

flow = bench.flow
STEPS = int(os.environ.get("PROBE_STEPS", "600"))
ROUNDS = int(os.environ.get("PROBE_ROUNDS", "3"))
MODEL, BATCH = os.environ.get("PROBE_CASE", "lenet:100").split(":")
BATCH = int(BATCH)
LR, MOMENTUM = bench.LR, bench.MOMENTUM


def weights(key):
    ks = jax.random.split(key, 5)
    tn = lambda k, s: 0.1 * jax.random.truncated_normal(k, -2, 2, s, jnp.float32)  # noqa: E731  (flowlayers: x64 on)
    if MODEL == "lenet":
        return [tn(ks[0], (5, 5, 1, 32)), jnp.zeros(32, jnp.float32), tn(ks[1], (5, 5, 32, 64)), jnp.zeros(64, jnp.float32),
                tn(ks[2], (7 * 7 * 64, 512)), jnp.zeros(512, jnp.float32), tn(ks[3], (512, 10)), jnp.zeros(10, jnp.float32)]
    dims = [784, 1024, 1024, 1024, 1024, 10] if MODEL == "mlp" else [784, 10]
    return sum(([tn(ks[i], (dims[i], dims[i + 1])) * 0.3, jnp.zeros(dims[i + 1], jnp.float32)]
                for i in range(len(dims) - 1)), [])


def per_example_loss(w, x, y):
    return -jnp.take_along_axis(jax.nn.log_softmax(hand_jax.forward(MODEL, w, x)), y[:, None], 1)[:, 0]


def plain_step(w, mom, x, y):
    loss, g = jax.value_and_grad(lambda w: jnp.mean(per_example_loss(w, x, y)))(w)
    mom = [MOMENTUM * m + gi for m, gi in zip(mom, g)]
    return [a - LR * m for a, m in zip(w, mom)], mom, loss


def flowlike_step(w, mom, x, y, lr, step):
    loss, g = jax.value_and_grad(lambda w: jnp.mean(per_example_loss(w, x, y)))(w)
    mom = [MOMENTUM * m + gi for m, gi in zip(mom, g)]
    return [a - lr * m for a, m in zip(w, mom)], mom, loss * x.shape[0], step + 1


def hand_runner(kind):
    mesh = Mesh(np.array(jax.devices()[:1]), ("data",))
    whole = NamedSharding(mesh, PartitionSpec())
    if kind in ("hand", "hand_x32"):
        fn = jax.jit(plain_step)
    elif kind == "hand_donated":
        fn = jax.jit(plain_step, donate_argnums=(0, 1))
    elif kind == "hand_sharded":
        fn = jax.jit(plain_step, donate_argnums=(0, 1), in_shardings=whole)
    else:
        fn = jax.jit(flowlike_step, donate_argnums=(0, 1), in_shardings=whole)
    state = {"w": weights(jax.random.PRNGKey(0))}
    state["mom"] = [jnp.zeros_like(a) for a in state["w"]]
    lr, step = jax.device_put(np.float32(LR), whole), jax.device_put(np.float32(1), whole)

    def run(batches):
        if kind == "hand_x32":
            jax.config.update("jax_enable_x64", False)
            try:
                return loop(batches)
            finally:
                jax.config.update("jax_enable_x64", True)
        return loop(batches)

    def loop(batches):
        w, mom, s, out = state["w"], state["mom"], step, None
        for x, y in batches:
            if kind == "hand_flowlike":
                w, mom, out, s = fn(w, mom, x, y, lr, s)
            else:
                w, mom, out = fn(w, mom, x, y)
        state["w"], state["mom"] = w, mom
        return out
    return run


def flow_model():
    flow.clear_session()
    flow.config.set_view("consistent")
    flow.config.gpu_device_num(1)
    m = bench.build(MODEL)
    m.compile(flow.optimizers.SGD(LR, momentum=MOMENTUM), flow.losses.SparseCategoricalCrossentropy(from_logits=True))
    return m


def flow_call_runner(m, X, Y):
    compiled = m.trainer.step("train")
    return lambda batches: [compiled.run([x, y], m.optimizer) for x, y in batches][-1][0]


def flow_jit_runner(m, X, Y):
    """flowlayers' jitted step (built by one step of ``Compiled.run``) called directly, its donated arrays threaded
    through as the executable does."""
    compiled = m.trainer.step("train")
    compiled.run([X[:BATCH], Y[:BATCH]], m.optimizer)
    ex = compiled.executable
    (fn,) = [f for key, f in ex._fns.items() if key[0] != "steps"]
    lr, running, step = ex._scalars(LR, m.optimizer.iterations + 1)
    current = lambda: [[b.value for b in group] for group in ex._boxes]  # noqa: E731  (the other flow runners move them)

    def run(batches):
        arrays, totals, number, outs = current(), running, step, None
        for x, y in batches:
            outs, *new = fn(*arrays, [[x, y]], lr, totals, number)
            arrays, totals, number = [*new, arrays[3]], outs[-2], outs[-1]
        for group, values in zip(ex._boxes, arrays):
            for box, value in zip(group, values):
                box.value = value
        return outs[0]
    run.lowered = lambda: fn.lower(*current(), [[X[:BATCH], Y[:BATCH]]], lr, running, step)
    return run


def flow_fit_runner(m, X, Y, takes_rows=None):
    per_epoch = min(len(X) // BATCH, STEPS)
    executable = m.trainer.step("train").executable
    default = executable.takes_rows

    def run(batches):
        executable.takes_rows = default if takes_rows is None else (lambda rows, sources: takes_rows)
        h = m.fit(X, Y, batch_size=BATCH, epochs=max(1, STEPS // per_epoch), steps_per_epoch=per_epoch, verbose=0,
                  shuffle=False)
        return h.history["loss"][-1]
    return run


def timed(run, batches):
    t0 = time.perf_counter()
    out = run(batches)
    dispatched = time.perf_counter() - t0
    float(np.asarray(jax.device_get(out) if not isinstance(out, float) else out))
    return time.perf_counter() - t0, dispatched


def main():
    X, Y = bench.load()
    n = (len(X) // BATCH) * BATCH
    X, Y = X[:n], Y[:n]
    per_epoch = min(n // BATCH, STEPS)
    steps = max(1, STEPS // per_epoch) * per_epoch
    batches = [(X[(k % (n // BATCH)) * BATCH:][:BATCH], Y[(k % (n // BATCH)) * BATCH:][:BATCH]) for k in range(steps)]
    m = flow_model()
    runners = {k: hand_runner(k) for k in ("hand_x32", "hand", "hand_donated", "hand_sharded", "hand_flowlike")}
    runners["flow_jit"] = flow_jit_runner(m, X, Y)
    runners["flow_call"] = flow_call_runner(m, X, Y)
    runners["flow_fit"] = flow_fit_runner(m, X, Y)
    runners["flow_fit_rows"] = flow_fit_runner(m, X, Y, takes_rows=True)
    runners["flow_fit_fed"] = flow_fit_runner(m, X, Y, takes_rows=False)
    for run in runners.values():       # compiles
        timed(run, batches[:per_epoch])
    times = {k: [] for k in runners}
    for _ in range(ROUNDS):
        for name, run in runners.items():
            times[name].append(timed(run, batches))
    for name, ts in times.items():
        total = statistics.median(t for t, _ in ts)
        share = statistics.median(d / t for t, d in ts)
        print(json.dumps({"probe": name, "model": MODEL, "batch": BATCH, "steps": steps,
                          "samples_per_s": round(BATCH * steps / total), "us_per_step": round(total / steps * 1e6, 1),
                          "host_share": round(share, 3), "device": bench.device_name()}), flush=True)
    if os.environ.get("PROBE_HLO"):
        os.makedirs(os.environ["PROBE_HLO"], exist_ok=True)
        whole = NamedSharding(Mesh(np.array(jax.devices()[:1]), ("data",)), PartitionSpec())
        w = weights(jax.random.PRNGKey(0))
        hand = jax.jit(flowlike_step, donate_argnums=(0, 1), in_shardings=whole).lower(
            w, w, X[:BATCH], Y[:BATCH], np.float32(LR), np.float32(1))
        for name, lowered in (("hand_flowlike", hand), ("flow", runners["flow_jit"].lowered())):
            with open(os.path.join(os.environ["PROBE_HLO"], f"{name}_{MODEL}_{BATCH}.hlo.txt"), "w") as f:
                f.write(lowered.compile().as_text())
    if os.environ.get("PROBE_PROFILE", "1") == "1":
        profile = cProfile.Profile()
        profile.enable()
        timed(runners["flow_fit"], batches)
        profile.disable()
        text = io.StringIO()
        pstats.Stats(profile, stream=text).sort_stats("tottime").print_stats(20)
        print(text.getvalue(), file=sys.stderr)


if __name__ == "__main__":
    main()
