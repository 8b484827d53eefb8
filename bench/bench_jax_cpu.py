"""The jax backend on logical CPU devices against what a JAX user would write instead: steps/s.

    python bench/bench_jax_cpu.py                   # prints the table
    python bench/bench_jax_cpu.py --write           # ... and writes bench/RESULTS_jax.md
    python bench/bench_jax_cpu.py --smoke           # one small round of everything: keeps it working
    python bench/bench_jax_cpu.py --endurance 200   # no timing: does each contender finish a 200-step fit?

Contenders, each in its own worker process (logical CPU devices are fixed when JAX starts; flowlayers' jax
backend turns on ``jax_enable_x64`` for its process, which must not reach the others):

- ``flow_consistent``: flowlayers on the jax backend, ``model.fit``, consistent view: data parallel over a ``data``
  mesh axis (``set_mesh(data=N)``); for the model-parallel MLP ``set_mesh(data=N/2, model=2)`` and a layout rule
  splitting the hidden Dense kernels' columns over ``model``.
- ``flow_mirrored``: the same, mirrored view (one replica per device; data parallel only).
- ``keras``: Keras 3 on JAX, ``model.fit`` under ``keras.distribution.DataParallel`` (model-parallel MLP:
  ``ModelParallel`` with a ``LayoutMap`` splitting the same kernels over a ``model`` axis of a data x model mesh).
- ``jax``: a hand-written ``jax.jit`` train step: ``NamedSharding``s (batch over ``data``, hidden kernels over
  ``model`` where model parallel), SGD with momentum, parameters and momenta donated; each numpy batch put on the
  devices by its sharding, as ``fit`` does.
- ``jax_wait``: the same step and loop, each step dispatched once the step before has ended (``block_until_ready``
  on its outputs): the form of the loop that keeps to one step with collectives in flight, as flowlayers' own
  steps do on several CPU devices (``--endurance`` shows why: on more logical devices than cores, the free-running
  loops of ``jax`` and ``keras`` abort the process in XLA:CPU's collectives once enough steps queue up).
- ``jax_shardmap`` (data parallel only): the same step written per device, ``jax.shard_map`` over ``data``,
  parameters replicated and donated (their gradients come out of the transpose summed over the devices: one
  all-reduce), divided by the device count: the mirrored view's form, by hand.

Models (names as gpu_peers.py's, NHWC): LeNet (conv32 5x5 - maxpool - conv64 5x5 - maxpool - dense512 - dense10),
batch 100; the MLP (four 1024-wide ReLU Dense layers, then Dense(10)), batch 256; the same MLP model parallel.
Data: real MNIST t10k (``../shared/data`` or $MNIST_DIR), the first steps x batch images, no shuffling; SGD(0.05,
momentum 0.9), softmax cross-entropy from logits.

Each contender runs in several worker processes (``--processes``, 3): one process's rounds can sit apart from
another's of the very same program on a shared host.  Each worker builds and runs one warm-up round (compiles;
excluded, timed as "first round s"), then the parent asks the workers of a (model, devices) group in turn for one
timed round of ``steps`` steps -- A1 B1 C1 A2 B2 C2 A3 B3 C3 A1 ... -- so that load from elsewhere falls on all
alike; the median of a contender's rounds in all its processes is reported, and the ratios are of medians from
the same group of the same run.  The logical devices share the host's cores: these figures compare
the frameworks' overheads at equal work, not speed-ups.
"""
import argparse
import contextlib
import gzip
import json
import os
import platform
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
DATA = Path(os.environ.get("MNIST_DIR", ROOT.parent / "shared" / "data"))
TAG = "@bench "
LR, MOMENTUM = 0.05, 0.9
BATCH = {"lenet": 100, "mlp": 256, "mlp_mp": 256}
STEPS = {"lenet": 20, "mlp": 20, "mlp_mp": 20}      # per timed round (batch x steps <= 10,000 images)
CONTENDERS = {"flow_consistent": "flowlayers jax, consistent", "flow_mirrored": "flowlayers jax, mirrored",
              "keras": "Keras 3 on JAX + keras.distribution", "jax": "hand-written jax.jit + NamedSharding",
              "jax_wait": "hand-written jax.jit + NamedSharding, waiting for the step before",
              "jax_shardmap": "hand-written jax.jit of a shard_map"}
HIDDEN = r"^fc[1-4]/kernel$"    # the model-parallel MLP: the hidden Dense kernels' columns over "model"


def mesh_of(model, devices):
    """(data, model) axis sizes."""
    return (devices // 2, 2) if model == "mlp_mp" else (devices, 1)


def load(n):
    import numpy as np

    im = np.frombuffer(gzip.open(DATA / "t10k-images-idx3-ubyte.gz").read(), np.uint8, offset=16)
    lb = np.frombuffer(gzip.open(DATA / "t10k-labels-idx1-ubyte.gz").read(), np.uint8, offset=8)
    return (im.reshape(-1, 28, 28, 1)[:n].astype("float32") / 255.0), lb[:n].astype("int32")


# Contenders: each gives round(x, y) -> None, one pass of batch-size steps, finished when it returns ------------
def flow_trainer(c):
    os.environ["FLOWLAYERS_BACKEND"] = "jax"
    import flowlayers as flow

    flow.config.set_backend("jax")
    flow.clear_session()
    view = "mirrored" if c["contender"] == "flow_mirrored" else "consistent"
    flow.config.set_view(view)
    flow.config.gpu_device_num(c["devices"])
    dp, mp = mesh_of(c["model"], c["devices"])
    if view == "consistent":
        flow.config.set_mesh(**({"data": dp, "model": mp} if mp > 1 else {"data": dp}))
        flow.config.set_layout_rules({HIDDEN: (None, "model")} if mp > 1 else {})
    model = keras_style(flow, c["model"])
    model.compile(flow.optimizers.SGD(LR, momentum=MOMENTUM),
                  flow.losses.SparseCategoricalCrossentropy(from_logits=True))
    batch = BATCH[c["model"]]

    def run(x, y):
        h = model.fit(x, y, batch_size=batch, epochs=1, verbose=0, shuffle=False)
        return float(h.history["loss"][-1])     # waits for the last step, as the other contenders do

    def shard():
        if view == "mirrored":
            return "fc1/kernel whole on each replica"
        line = next(ln for ln in str(model.parallel_plan()).splitlines() if ln.startswith("fc1/kernel "))
        cols = re.split(r"\s{2,}", line.strip())        # variable, logical shape, SBP, shard shape, ...
        return f"fc1/kernel {cols[2]} shard {cols[3]}"
    run.shard = shard
    return run


def keras_trainer(c):
    os.environ["KERAS_BACKEND"] = "jax"
    import keras

    devices = keras.distribution.list_devices()[:c["devices"]]
    dp, mp = mesh_of(c["model"], c["devices"])
    if mp > 1:
        mesh = keras.distribution.DeviceMesh((dp, mp), ["data", "model"], devices)
        layouts = keras.distribution.LayoutMap(mesh)
        layouts[HIDDEN] = (None, "model")
        dist = keras.distribution.ModelParallel(layout_map=layouts, batch_dim_name="data")
    else:
        dist = keras.distribution.DataParallel(devices=devices)
    keras.distribution.set_distribution(dist)
    keras.utils.set_random_seed(0)
    model = keras_style(keras, c["model"])
    model.compile(keras.optimizers.SGD(LR, momentum=MOMENTUM),
                  keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    batch = BATCH[c["model"]]

    def run(x, y):
        h = model.fit(x, y, batch_size=batch, epochs=1, verbose=0, shuffle=False)
        return h.history["loss"][-1]

    def shard():
        v = model.get_layer("fc1").kernel.value
        return f"fc1/kernel {v.sharding.spec} shard {v.sharding.shard_shape(v.shape)}"
    run.shard = shard
    return run


def keras_style(api, model):
    """The model in a Keras-style API (flowlayers' Keras face or Keras 3): same layers, same names."""
    x = api.Input((28, 28, 1))
    if model == "lenet":
        init = api.initializers.TruncatedNormal(stddev=0.1)
        h = api.layers.Conv2D(32, 5, padding="same", activation="relu", kernel_initializer=init, name="conv1")(x)
        h = api.layers.MaxPool2D(2, 2, padding="same")(h)
        h = api.layers.Conv2D(64, 5, padding="same", activation="relu", kernel_initializer=init, name="conv2")(h)
        h = api.layers.MaxPool2D(2, 2, padding="same")(h)
        h = api.layers.Flatten()(h)
        h = api.layers.Dense(512, activation="relu", kernel_initializer=init, name="fc1")(h)
    else:
        h = api.layers.Flatten()(x)
        for i in range(1, 5):
            h = api.layers.Dense(1024, activation="relu", name=f"fc{i}")(h)
    return api.Model(x, api.layers.Dense(10, name="out")(h))


def jax_trainer(c):
    import functools

    import jax
    import hand_jax
    import jax.numpy as jnp
    import numpy as np
    from jax.sharding import Mesh, NamedSharding, PartitionSpec as P

    dp, mp = mesh_of(c["model"], c["devices"])
    mesh = Mesh(np.array(jax.devices()[:c["devices"]]).reshape(dp, mp), ("data", "model"))
    rng = np.random.default_rng(0)

    def tn(shape, std):     # truncated at two standard deviations (redrawn), as Keras' TruncatedNormal
        a = rng.normal(0, std, shape)
        while (out := np.abs(a) > 2 * std).any():
            a[out] = rng.normal(0, std, out.sum())
        return a.astype(np.float32)

    def glorot(shape):
        lim = np.sqrt(6.0 / (shape[0] + shape[1]))
        return rng.uniform(-lim, lim, shape).astype(np.float32)

    if c["model"] == "lenet":
        w = [tn((5, 5, 1, 32), 0.1), np.zeros(32, np.float32), tn((5, 5, 32, 64), 0.1), np.zeros(64, np.float32),
             tn((7 * 7 * 64, 512), 0.1), np.zeros(512, np.float32), glorot((512, 10)), np.zeros(10, np.float32)]
        specs = [P()] * len(w)
    else:
        dims = [784, 1024, 1024, 1024, 1024, 10]
        w = sum(([glorot((dims[i], dims[i + 1])), np.zeros(dims[i + 1], np.float32)] for i in range(5)), [])
        hidden = P(None, "model") if mp > 1 else P()
        specs = sum(([hidden if i < 4 else P(), P()] for i in range(5)), [])
    shardings = [NamedSharding(mesh, s) for s in specs]
    w = [jax.device_put(a, s) for a, s in zip(w, shardings)]
    mom = [jax.device_put(np.zeros_like(np.asarray(a)), s) for a, s in zip(w, shardings)]
    x_sh, y_sh = NamedSharding(mesh, P("data")), NamedSharding(mesh, P("data"))

    def loss_fn(w, x, y):
        return jnp.mean(-jnp.take_along_axis(jax.nn.log_softmax(hand_jax.forward(c["model"], w, x)), y[:, None], 1))

    def update(w, mom, g):
        mom = [MOMENTUM * m + gi for m, gi in zip(mom, g)]
        return [a - LR * m for a, m in zip(w, mom)], mom

    if c["contender"] == "jax_shardmap":      # per device: its rows, its copy of the parameters
        def replica(w, mom, x, y):
            loss, g = jax.value_and_grad(loss_fn)(w, x, y)
            # w is replicated (the same on every device of "data"): shard_map's transpose has already summed its
            # gradient over the devices (an all-reduce), so the mean gradient is that sum / dp
            return *update(w, mom, [gi / dp for gi in g]), jax.lax.pmean(loss, "data")

        step = jax.jit(jax.shard_map(replica, mesh=mesh, in_specs=(P(), P(), P("data"), P("data")),
                                     out_specs=(P(), P(), P())), donate_argnums=(0, 1))
    else:   # the logical step; XLA's SPMD partitioner inserts the collectives
        @functools.partial(jax.jit, donate_argnums=(0, 1),
                           out_shardings=(shardings, shardings, NamedSharding(mesh, P())))
        def step(w, mom, x, y):
            loss, g = jax.value_and_grad(loss_fn)(w, x, y)
            return *update(w, mom, g), loss

    state = {"w": w, "mom": mom}
    batch = BATCH[c["model"]]

    waits = c["contender"] == "jax_wait"

    def run(x, y):
        loss = None
        for i in range(0, len(x) - batch + 1, batch):
            xb, yb = jax.device_put(x[i:i + batch], x_sh), jax.device_put(y[i:i + batch], y_sh)
            if waits and loss is not None:
                jax.block_until_ready(loss)
            state["w"], state["mom"], loss = step(state["w"], state["mom"], xb, yb)
        return float(loss)      # waits for the last step

    def shard():
        v = state["w"][4 if c["model"] == "lenet" else 0]
        return f"fc1/kernel {v.sharding.spec} shard {v.sharding.shard_shape(v.shape)}"
    run.shard = shard
    return run


def worker(c, steps):
    os.environ["JAX_PLATFORMS"] = "cpu"
    os.environ["TF_CPP_MIN_LOG_LEVEL"] = "3"
    if c["contender"].startswith("flow"):
        os.environ["FLOWLAYERS_CPU_DEVICES"] = str(c["devices"])
    else:
        os.environ["XLA_FLAGS"] = (os.environ.get("XLA_FLAGS", "") +
                                   f" --xla_force_host_platform_device_count={c['devices']}").strip()
    import warnings

    warnings.filterwarnings("ignore")

    def reply(**kw):
        print(TAG + json.dumps(kw), flush=True)

    x, y = load(steps * BATCH[c["model"]])
    reply(ready=True)
    run = None
    for line in sys.stdin:
        cmd = line.strip()
        if cmd == "build":
            t = time.perf_counter()
            run = {"flow_consistent": flow_trainer, "flow_mirrored": flow_trainer, "keras": keras_trainer,
                   "jax": jax_trainer, "jax_wait": jax_trainer, "jax_shardmap": jax_trainer}[c["contender"]](c)
            build = time.perf_counter() - t
            t = time.perf_counter()
            run(x, y)       # warm-up: traces and compiles
            reply(build_s=build, first_s=time.perf_counter() - t, check=_check(run))
        elif cmd == "run":
            t = time.perf_counter()
            loss = run(x, y)
            reply(steps_per_s=steps / (time.perf_counter() - t), loss=float(loss))
        elif cmd.startswith("endure "):     # one fit of that many steps, the rounds' data over and over
            import numpy as np

            n = int(cmd.split()[1]) * BATCH[c["model"]]
            t = time.perf_counter()
            loss = run(np.resize(x, (n,) + x.shape[1:]), np.resize(y, n))
            reply(endured_s=time.perf_counter() - t, loss=float(loss))
        elif cmd == "quit":
            reply(bye=True)
            return


def _check(run):
    """What ran where, to be sure each contender used the devices and layout it was given."""
    import jax

    try:
        shard = run.shard()
    except Exception as e:  # noqa: BLE001 - a label only
        shard = f"fc1/kernel: ? ({type(e).__name__})"
    return f"{jax.device_count()} {jax.default_backend()} devices, x64={jax.config.jax_enable_x64}, {shard}"


# The parent ----------------------------------------------------------------------------------------------------
class Worker:
    def __init__(self, c, steps):
        self.config, self.log = c, tempfile.TemporaryFile("w+")
        cmd = [sys.executable, str(Path(__file__).resolve()), "--worker", json.dumps(c), "--steps", str(steps)]
        env = {k: v for k, v in os.environ.items() if k not in ("XLA_FLAGS", "FLOWLAYERS_CPU_DEVICES",
                                                                "FLOWLAYERS_BACKEND", "KERAS_BACKEND")}
        self.proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.log, text=True,
                                     cwd=str(HERE), env=env)
        self.result = {"steps_per_s": [], "loss": []}

    def ask(self, cmd=None):
        if cmd:
            self.proc.stdin.write(cmd + "\n")
            self.proc.stdin.flush()
        for line in self.proc.stdout:
            if line.startswith(TAG):
                answer = json.loads(line[len(TAG):])
                for k, v in answer.items():
                    if k in ("steps_per_s", "loss"):
                        self.result[k].append(v)
                    else:
                        self.result[k] = v
                return answer
        self.log.seek(0)
        raise RuntimeError(f"worker {self.config} exited (rc {self.proc.wait()}) before answering {cmd or 'start'}:"
                           f"\n{self.log.read()[-3000:]}")

    def close(self):
        try:
            if self.proc.poll() is None:
                self.ask("quit")
        finally:
            self.proc.wait()
            self.log.close()


def run_group(configs, steps, repeats, echo, processes=1, alone=False):
    """Each config in ``processes`` worker processes, ``repeats`` timed rounds each, in turn: A1 B1 A2 B2 ... A1 B1
    ...  One process's rounds can sit apart from another's of the very same program (on the shared 2-core host
    of RESULTS_jax.md, about 20 against 26 steps/s for the MLP): each contender's figures are its rounds in all
    its processes.  ``alone``: one worker process alive at a time (A1 B1 A2 B2 ..., each its rounds in a row), no
    idle worker beside it."""
    if alone:
        return _merged(configs, [_alone(c, steps, repeats, echo) for _ in range(processes) for c in configs])
    workers = [Worker(c, steps) for _ in range(processes) for c in configs]
    try:
        for w in workers:
            w.ask()
        for w in workers:
            w.ask("build")
            echo(f"  built {w.config['contender']}: build {w.result['build_s']:.2f}s, first round "
                 f"{w.result['first_s']:.2f}s ({w.result['check']})")
        for r in range(repeats):
            for w in workers:
                w.ask("run")
            echo(f"  round {r + 1}/{repeats}: " + ", ".join(f"{w.config['contender']} {w.result['steps_per_s'][-1]:.2f}"
                                                            for w in workers))
    finally:
        for w in workers:
            w.close()
    return _merged(configs, workers)


@contextlib.contextmanager
def _built(c, steps):
    """A worker for ``c`` that has built its contender and run its warm-up round; closed on the way out."""
    w = Worker(c, steps)
    try:
        w.ask()
        w.ask("build")
        yield w
    finally:
        w.close()


def _alone(c, steps, repeats, echo):
    with _built(c, steps) as w:
        for _ in range(repeats):
            w.ask("run")
    echo(f"  {c['contender']} alone: " + ", ".join(f"{v:.2f}" for v in w.result["steps_per_s"]))
    return w


def _merged(configs, workers):
    """Per config, its workers' results as one: every round, the median first round, each process's median."""
    merged = []
    for c in configs:
        mine = [w.result for w in workers if w.config is c]
        merged.append(dict(mine[0], config=c, steps_per_s=[v for r in mine for v in r["steps_per_s"]],
                           first_s=median([r["first_s"] for r in mine]),
                           per_process=[median(r["steps_per_s"]) for r in mine]))
    return merged


def endurance(args, echo):
    """Each contender alone in its own process: one ``fit`` (or loop) of ``args.endurance`` steps after its
    warm-up round; did the process finish?"""
    rows = ["| model | devices | contender | steps | outcome |", "|---|---|---|---|---|"]
    for model, devices, configs in groups_of(args):
        for c in configs:
            with _built(c, args.steps or STEPS[model]) as w:
                t = time.perf_counter()
                try:
                    outcome = f"finished in {w.ask(f'endure {args.endurance}')['endured_s']:.1f} s"
                except RuntimeError as e:
                    w.log.seek(0)
                    fatal = [ln for ln in w.log.read().splitlines() if ln.startswith("F") and "rendezvous" in ln]
                    why = (re.sub(r"^F\S+\s+\S+\s+\S+\s+\S+\s+", "", fatal[0]).replace("`", "'")
                           if fatal else str(e).splitlines()[0])
                    outcome = f"**process aborted** after {time.perf_counter() - t:.0f} s: {why}"
            echo(f"  {model} {devices} dev {c['contender']}: {outcome}")
            rows.append(f"| {model} | {devices} | {CONTENDERS[c['contender']]} | {args.endurance} | {outcome} |")
    return rows


def groups_of(args):
    """(model, devices, configs) for each group of the run; the mirrored view and the shard_map step are data
    parallel only, so they sit out the model-parallel MLP."""
    for model in args.models.split(","):
        for devices in (int(d) for d in args.devices.split(",")):
            yield model, devices, [{"model": model, "devices": devices, "contender": k}
                                   for k in args.contenders.split(",")
                                   if not (k in ("flow_mirrored", "jax_shardmap") and model == "mlp_mp")]


def median(v):
    return statistics.median(v) if v else float("nan")


def table(results):
    rows = ["| devices | mesh | contender | steps/s (median) | samples/s | min - max steps/s | each process's median "
            "| vs Keras 3 (median; "
            "best) | vs hand-written jax.jit + NamedSharding (median; best) | vs the same, waiting (median; best) | "
            "vs hand-written shard_map (median; best) | first round s | final loss |",
            "|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    by = {(r["config"]["devices"], r["config"]["contender"]): (median(r["steps_per_s"]), max(r["steps_per_s"]))
          for r in results}
    for r in results:
        c, v, best = r["config"], median(r["steps_per_s"]), max(r["steps_per_s"])
        dp, mp = mesh_of(c["model"], c["devices"])
        mesh = f"data={dp}" + (f", model={mp}" if mp > 1 else "")
        if c["contender"] in ("flow_mirrored", "jax_shardmap"):
            mesh = f"replica={c['devices']}" if c["contender"] == "flow_mirrored" else f"data={dp} (shard_map)"
        ker, jx, jw, sm = (by.get((c["devices"], k)) for k in ("keras", "jax", "jax_wait", "jax_shardmap"))
        ratio = lambda ref: (f"{v / ref[0]:.2f}x; {best / ref[1]:.2f}x" if ref and c["contender"].startswith("flow")  # noqa: E731
                             else "–")
        rows.append(f"| {c['devices']} | {mesh} | {CONTENDERS[c['contender']]} | {v:.2f} | "
                    f"{v * BATCH[c['model']]:.0f} | {min(r['steps_per_s']):.2f} - {max(r['steps_per_s']):.2f} | "
                    f"{' / '.join(f'{m:.1f}' for m in r['per_process'])} | {ratio(ker)} | {ratio(jx)} | {ratio(jw)} | {ratio(sm)} | {r['first_s']:.2f} | "
                    f"{r['loss'][-1]:.3f} |")
    return rows


def versions():
    out = subprocess.run([sys.executable, "-c", "import os; os.environ['KERAS_BACKEND']='jax'\n"
                          "import jax, keras, flowlayers as f; print(jax.__version__, keras.__version__, f.__version__)"],
                         capture_output=True, text=True).stdout.split()
    return out + ["?"] * (3 - len(out))


def machine():
    cpu = next((line.split(":", 1)[1].strip() for line in open("/proc/cpuinfo") if line.startswith("model name")),
               platform.processor())
    jax_v, keras_v, flow_v = versions()
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                            cwd=ROOT).stdout.strip()
    dirty = subprocess.run(["git", "status", "--porcelain", "--", "flowlayers", "backends"], capture_output=True,
                           text=True, cwd=ROOT).stdout.strip()
    return (f"{cpu}, {os.cpu_count()} cores, {os.sysconf('SC_PAGE_SIZE') * os.sysconf('SC_PHYS_PAGES') >> 30} GiB; "
            f"Python {platform.python_version()}; JAX {jax_v} (CPU), Keras {keras_v}, flowlayers {flow_v} at commit "
            f"{commit or '?'}{' + uncommitted changes' if dirty else ''}")


def loadavg():
    return open("/proc/loadavg").read().split()[0]


TITLES = {"lenet": "LeNet (conv32-pool-conv64-pool-dense512-dense10), data parallel",
          "mlp": "MLP, four 1024-wide Dense layers, data parallel",
          "mlp_mp": "MLP, four 1024-wide Dense layers, model parallel: hidden kernels' columns split over `model`"}


def report(args, groups, loads, started, wall):
    lines = [f"# flowlayers' jax backend against Keras 3 on JAX and hand-written JAX "
             f"({time.strftime('%Y-%m-%d', time.localtime(started))})", "",
             f"Machine: {machine()}.", "",
             f"Real MNIST (the t10k images of `../shared/data`), NHWC, SGD(0.05, momentum 0.9), softmax "
             f"cross-entropy. Each contender in its own process on N logical CPU devices "
             f"(`FLOWLAYERS_CPU_DEVICES` for flowlayers, `--xla_force_host_platform_device_count` for the others); "
             f"they share the host's {os.cpu_count()} cores, so these figures compare the frameworks' overhead at "
             f"equal work, not scaling. A round is one `fit` of "
             f"{', '.join(f'{args.steps or STEPS[m]} steps for {m}' for m in args.models.split(','))} (flowlayers and "
             f"Keras: `model.fit(x, y, batch_size, epochs=1, shuffle=False, verbose=0)`) or the same steps of the "
             f"hand-written `jax.jit` step over the same numpy batches; each contender in {args.processes} worker "
             f"processes, {args.repeats} timed rounds in each, " + (
                 "one process alive at a time, its rounds in a row (A1 A1 A1 B1 B1 B1 A2 ...); " if args.alone else
                 "all alternating (A1 B1 A2 B2 ...); ") + f"its median over "
             f"those {args.processes * args.repeats} rounds, after one warm-up round per process that compiles "
             f"(its time, the median over the processes: first round s); each process's median is listed, since one "
             f"process's rounds can sit apart from another's of the very same program on this shared host. The ratios divide medians (and, after the semicolon, best rounds) of the same group of this run: load from elsewhere only slows a round down, so where it changed during a group (a wide min - max) the best rounds compare more fairly than the medians. The model-parallel MLP uses the "
             f"same split in all three: the four hidden Dense kernels' columns over `model` "
             f"(flowlayers: `set_layout_rules({{r\"{HIDDEN}\": (None, \"model\")}})`; Keras: `LayoutMap` + "
             f"`ModelParallel(batch_dim_name=\"data\")`; hand-written: `NamedSharding(mesh, P(None, \"model\"))`); "
             f"the mirrored view and the shard_map step are data parallel only. The hand-written steps donate the "
             f"parameters and momenta, as flowlayers' steps do. The hand-written loop and Keras' `fit` dispatch each "
             f"step without waiting for the one before; on these logical CPU devices that free-running loop aborts "
             f"the process once enough steps queue up (`RESULTS_jax_endurance.md`: a 200-step fit), so flowlayers "
             f"dispatches a step once the step before has ended, and \"waiting\" is the hand-written loop doing the "
             f"same (`block_until_ready` on the step before's loss before each dispatch). flowlayers' processes run "
             f"with `jax_enable_x64` on (its backend turns it on; the models stay float32), and with glibc set to "
             f"keep XLA:CPU's freed step buffers (its backend does so on CPUs: `host_heap.py`); the others run "
             f"glibc as it comes, as a user's program has it (`RESULTS_jax_heap.md`: with the same setting the "
             f"hand-written loop ran 0% faster on LeNet and 22% on the MLP, on 4 devices). "
             f"Contenders: `python bench/bench_jax_cpu.py --help`. 1-minute load average at the start of each group: "
             f"{', '.join(loads)}; at the end: {loadavg()} (the machine is shared). Whole run: {wall:.0f} s. "
             f"Command: `python bench/bench_jax_cpu.py {' '.join(sys.argv[1:])}`.", ""]
    for (model, devices), results in groups.items():
        if devices == min(d for m, d in groups if m == model):
            results = [r for (m, _), rs in groups.items() if m == model for r in rs]
            lines += [f"## {TITLES[model]}, batch {BATCH[model]}", ""] + table(results) + [""]
            lines += ["What each worker reported after its warm-up round (devices, 64-bit mode, the layout of "
                      "`fc1/kernel` read from the engine):", ""]
            lines += [f"- {r['config']['devices']} dev, {CONTENDERS[r['config']['contender']]}: {r['check']}"
                      for r in results] + [""]
    return "\n".join(lines) + "\n"


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--models", default="lenet,mlp,mlp_mp")
    parser.add_argument("--devices", default="2,4")
    parser.add_argument("--contenders", default=",".join(CONTENDERS))
    parser.add_argument("--repeats", type=int, default=3, help="timed rounds per worker process")
    parser.add_argument("--processes", type=int, default=3, help="worker processes per contender")
    parser.add_argument("--alone", action="store_true",
                        help="one worker process alive at a time, its rounds in a row (A1 A1 A1 B1 B1 B1 A2 ...)")
    parser.add_argument("--steps", type=int, help="steps per timed round (default: 20 per model)")
    parser.add_argument("--write", action="store_true", help="write the report to --out")
    parser.add_argument("--out", default=str(HERE / "RESULTS_jax.md"))
    parser.add_argument("--smoke", action="store_true", help="2 devices, 2 steps, 1 round")
    parser.add_argument("--endurance", type=int, metavar="STEPS",
                        help="instead of timing: each contender runs one fit of STEPS steps; did it finish?")
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        return worker(json.loads(args.worker), args.steps)
    if args.smoke:
        args.devices, args.steps, args.repeats, args.processes = "2", 2, 1, 1
    echo = lambda s: print(s, file=sys.stderr, flush=True)  # noqa: E731
    if args.endurance:
        started = time.time()
        rows = endurance(args, echo)
        text = "\n".join([
            f"# Does each contender finish a long fit? ({time.strftime('%Y-%m-%d', time.localtime(started))})", "",
            f"Machine: {machine()}. Each contender alone in its own process on N logical CPU devices: its warm-up "
            f"round, then one `fit` (or loop) of {args.endurance} steps over the MNIST rows again and again, nothing "
            f"read on the host in between. XLA:CPU aborts a process whose collectives wait 40 s for a device "
            f"(\"Termination timeout ... Exiting to ensure a consistent program state\"). Whole run: "
            f"{time.time() - started:.0f} s. Command: `python bench/bench_jax_cpu.py {' '.join(sys.argv[1:])}`.",
            ""] + rows) + "\n"
        if args.write:
            Path(HERE / "RESULTS_jax_endurance.md").write_text(text)
        print(text)
        return
    started, groups, loads = time.time(), {}, []
    for model, devices, configs in groups_of(args):
        loads.append(loadavg())
        echo(f"{model} on {devices} devices (load {loads[-1]})")
        groups[(model, devices)] = run_group(configs, args.steps or STEPS[model], args.repeats, echo,
                                             args.processes, args.alone)
    text = report(args, groups, loads, started, time.time() - started)
    if args.write:
        Path(args.out).write_text(text)
    print(text)


if __name__ == "__main__":
    sys.exit(main())
