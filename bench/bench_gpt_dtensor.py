"""Tutorial 07's GPT trained by flowlayers vs the same GPT written by hand in TF DTensor, same process, same layouts.

    python bench/bench_gpt_dtensor.py       # writes bench/RESULTS_gpt_dtensor.md

The hand-written model holds DVariables with the layouts flowlayers' rules give (attention heads split over
``model``, the MLP's first kernel by columns and second by rows, the batch over ``data``), computes with plain TF
ops, and trains in two tf.functions: the gradients in one, Keras' Adam arithmetic in the other (one fused function
silently skips updates with DTensor's all-reduce combiner on: ../shared/notes/dtensor_fused_update_bug.py).
Both start from flowlayers' initial weights.  Steps alternate between the two; samples/s is the median of the
timed steps after two warm-ups, on logical CPU devices that share this machine's cores.
"""
import argparse
import datetime
import math
import os
import platform
import sys
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402
from tensorflow.experimental import dtensor  # noqa: E402

# TF can be split into logical CPU devices only before it starts; flowlayers then uses these four.
tf.config.set_logical_device_configuration(tf.config.list_physical_devices("CPU")[0],
                                           [tf.config.LogicalDeviceConfiguration()] * 4)
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench_gpt  # noqa: E402  (tutorial 07's model and bench_gpt's `build`)

HERE = os.path.dirname(os.path.abspath(__file__))
U = dtensor.UNSHARDED
CONFIGURATIONS = [("one device", {"data": 1, "model": 1}), ("tensor parallel, model=2", {"data": 1, "model": 2}),
                  ("tensor parallel, model=4", {"data": 1, "model": 4}),
                  ("data x model = 2 x 2, tensor parallel", {"data": 2, "model": 2})]
# Per weight-name suffix, the sharded axes (flow.parallel.attention_rules() + tutorial 07's MLP_RULES); others whole.
SHARDING = {"query/kernel": [U, "model", U], "key/kernel": [U, "model", U], "value/kernel": [U, "model", U],
            "query/bias": ["model", U], "key/bias": ["model", U], "value/bias": ["model", U],
            "attention_output/kernel": ["model", U, U], "mlp_in/kernel": [U, "model"], "mlp_in/bias": ["model"],
            "mlp_out/kernel": ["model", U]}
BETA_1, BETA_2, EPSILON, LN_EPSILON = 0.9, 0.999, 1e-7, 1e-3


def flow_mesh_args(sizes):
    """bench_gpt.build's (devices, mesh, rules) for a configuration."""
    devices = sizes["data"] * sizes["model"]
    if devices == 1:
        return 1, {}, dict
    mesh = {axis: n for axis, n in sizes.items() if n > 1}
    return devices, mesh, lambda: {**bench_gpt.flow.parallel.attention_rules(), **bench_gpt.char_gpt.MLP_RULES}


class HandWrittenGPT:
    """The GPT as DVariables on a data x model mesh; `step(ids, labels)` trains once and returns the loss."""

    def __init__(self, sizes, weights, heads, blocks, learning_rate=1e-3):
        devices = [f"CPU:{i}" for i in range(sizes["data"] * sizes["model"])]
        self.mesh = dtensor.create_mesh([("data", sizes["data"]), ("model", sizes["model"])], devices=devices,
                                        device_type="CPU")
        self.heads, self.blocks, self.learning_rate = heads, blocks, learning_rate
        self.names = list(weights)
        self.params = {name: dtensor.DVariable(self.place(value, self.layout_of(name, value.ndim)))
                       for name, value in weights.items()}
        self.m = {n: dtensor.DVariable(self.place(np.zeros_like(w), self.layout_of(n, w.ndim))) for n, w in
                  weights.items()}
        self.v = {n: dtensor.DVariable(self.place(np.zeros_like(w), self.layout_of(n, w.ndim))) for n, w in
                  weights.items()}
        self.iterations = dtensor.DVariable(self.place(np.float32(0), dtensor.Layout([], self.mesh)))
        seq = weights["position_embedding/embeddings"].shape[0]
        self.causal = self.place(np.tril(np.ones((seq, seq), np.float32)), dtensor.Layout([U, U], self.mesh))
        self.variables = [self.params[n] for n in self.names]
        self.gradients = tf.function(self._gradients)
        self.apply_adam = tf.function(self._apply_adam)
        self.forward_loss = tf.function(self.loss)

    def layout_of(self, name, ndim):
        spec = next((s for suffix, s in SHARDING.items() if name.endswith(suffix)), [U] * ndim)
        return dtensor.Layout(spec, self.mesh)

    def place(self, value, layout):
        """A numpy array as a DTensor with `layout`: each device gets its block."""
        value = np.asarray(value)
        blocks = []
        for device in range(self.mesh.num_local_devices()):
            coords = dict(zip(self.mesh.dim_names, np.unravel_index(device, [self.mesh.dim_size(d) for d in
                                                                             self.mesh.dim_names])))
            index = []
            for axis, spec in enumerate(layout.sharding_specs):
                if spec == U:
                    index.append(slice(None))
                else:
                    size = value.shape[axis] // self.mesh.dim_size(spec)
                    index.append(slice(coords[spec] * size, (coords[spec] + 1) * size))
            blocks.append(tf.constant(value[tuple(index)]))
        return dtensor.pack(blocks, layout)

    def read(self, tensor):
        """A DTensor back as one numpy array (gathered onto every device, first device's copy)."""
        tensor = tf.convert_to_tensor(tensor)
        return dtensor.unpack(dtensor.relayout(tensor, dtensor.Layout.replicated(self.mesh, tensor.shape.rank)))[
            0].numpy()

    def layer_norm(self, x, prefix):
        mean, variance = tf.nn.moments(x, [-1], keepdims=True)
        return (x - mean) * tf.math.rsqrt(variance + LN_EPSILON) * self.params[prefix + "/gamma"] + \
            self.params[prefix + "/beta"]

    def attention(self, x, prefix):
        p = self.params
        key_dim = p[prefix + "/query/kernel"].shape[-1]
        q = (tf.einsum("btd,dhk->bthk", x, p[prefix + "/query/kernel"]) + p[prefix + "/query/bias"]) * (
            1.0 / math.sqrt(key_dim))
        k = tf.einsum("btd,dhk->bthk", x, p[prefix + "/key/kernel"]) + p[prefix + "/key/bias"]
        v = tf.einsum("btd,dhk->bthk", x, p[prefix + "/value/kernel"]) + p[prefix + "/value/bias"]
        scores = tf.einsum("bshk,bthk->bhts", k, q) + (1.0 - self.causal) * -1e9
        attended = tf.einsum("bhts,bshk->bthk", tf.nn.softmax(scores, axis=-1), v)
        return tf.einsum("bthk,hkd->btd", attended, p[prefix + "/attention_output/kernel"]) + \
            p[prefix + "/attention_output/bias"]

    def loss(self, ids, labels):
        p = self.params
        h = tf.gather(p["token_embedding/embeddings"], ids) + p["position_embedding/embeddings"]
        for b in range(self.blocks):
            h = h + self.attention(self.layer_norm(h, f"b{b}_norm1"), f"b{b}_attn")
            m = tf.nn.gelu(tf.einsum("btd,df->btf", self.layer_norm(h, f"b{b}_norm2"), p[f"b{b}_mlp_in/kernel"]) +
                           p[f"b{b}_mlp_in/bias"], approximate=False)
            h = h + tf.einsum("btf,fd->btd", m, p[f"b{b}_mlp_out/kernel"]) + p[f"b{b}_mlp_out/bias"]
        logits = tf.einsum("btd,dv->btv", self.layer_norm(h, "final_norm"), p["lm_head/kernel"]) + \
            p["lm_head/bias"]
        return tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(labels, logits))

    def _gradients(self, ids, labels):
        with tf.GradientTape() as tape:
            loss = self.loss(ids, labels)
        # the embedding's gradient is IndexedSlices; Adam's dense update wants a dense tensor
        return loss, [tf.convert_to_tensor(g) for g in tape.gradient(loss, self.variables)]

    def _apply_adam(self, gradients):
        """Keras' Adam: m += (g - m)(1 - b1); v += (g^2 - v)(1 - b2); w -= lr_t m / (sqrt(v) + eps)."""
        step = self.iterations + 1.0
        lr_t = self.learning_rate * tf.sqrt(1.0 - tf.pow(BETA_2, step)) / (1.0 - tf.pow(BETA_1, step))
        for name, g in zip(self.names, gradients):
            m = self.m[name].assign_add((g - self.m[name]) * (1.0 - BETA_1))
            v = self.v[name].assign_add((g * g - self.v[name]) * (1.0 - BETA_2))
            self.params[name].assign_sub(lr_t * m / (tf.sqrt(v) + EPSILON))
        self.iterations.assign(step)

    def step(self, ids, labels):
        """One training step from numpy: place the batch (split over data), gradients, Adam; the loss as a float."""
        ids = self.place(ids, dtensor.Layout(["data", U], self.mesh))
        labels = self.place(labels, dtensor.Layout(["data", U], self.mesh))
        with dtensor.default_mesh(self.mesh):
            loss, gradients = self.gradients(ids, labels)
            self.apply_adam(gradients)
        return float(self.read(loss))

    def eval_loss(self, ids, labels):
        with dtensor.default_mesh(self.mesh):
            batch = dtensor.Layout(["data", U], self.mesh)
            return float(self.read(self.forward_loss(self.place(ids, batch), self.place(labels, batch))))

    def shard_shape(self, name):
        return tuple(dtensor.unpack(self.params[name].read_value())[0].shape)


def timed(fn):
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    bench_gpt.add_size_arguments(parser)
    parser.add_argument("--out", default=os.path.join(HERE, "RESULTS_gpt_dtensor.md"))
    args = parser.parse_args()

    feeds, labels = bench_gpt.batch(args)
    ids = feeds[0]

    def pair(sizes):
        model = bench_gpt.build(args, *flow_mesh_args(sizes))
        weights = {w.path: value for w, value in zip(model.weights, model.get_weights())}
        return model, HandWrittenGPT(sizes, weights, args.heads, args.blocks)

    # Correctness first: one device, 3 steps from the same weights, then the loss of both at the weights reached.
    model, hand = pair(CONFIGURATIONS[0][1])
    step_losses = [(model.train_on_batch(feeds, labels), hand.step(ids, labels)) for _ in range(3)]
    flow_after, hand_after = float(model.test_on_batch(feeds, labels)), hand.eval_loss(ids, labels)
    weight_diff = max(float(np.abs(hand.read(hand.params[w.path]) - value).max())
                      for w, value in zip(model.weights, model.get_weights()))
    check = (f"one device, 3 Adam steps from flowlayers' initial weights: loss after them flowlayers "
             f"{flow_after:.6f}, hand-written {hand_after:.6f}, |difference| {abs(flow_after - hand_after):.1e} "
             f"(per-step losses {[(round(a, 6), round(b, 6)) for a, b in step_losses]}); max |weight difference| "
             f"{weight_diff:.1e}")
    print(check, flush=True)
    if abs(flow_after - hand_after) > 1e-4:
        sys.exit("hand-written step disagrees with flowlayers beyond 1e-4; not timing it")

    rows = []
    for name, sizes in CONFIGURATIONS:
        model, hand = pair(sizes)
        for _ in range(2):
            model.train_on_batch(feeds, labels)
            hand.step(ids, labels)
        flow_times, hand_times = [], []
        for _ in range(args.steps):     # alternate, so drifting load on the machine hits both alike
            flow_times.append(timed(lambda: model.train_on_batch(feeds, labels)))
            hand_times.append(timed(lambda: hand.step(ids, labels)))
        loss_gap = abs(float(model.test_on_batch(feeds, labels)) - hand.eval_loss(ids, labels))
        rows.append((name, sizes, flow_times, hand_times, loss_gap))
        print(f"{name} (hand-written per device: query kernel {hand.shard_shape('b0_attn/query/kernel')}, mlp_in "
              f"kernel {hand.shard_shape('b0_mlp_in/kernel')}): flowlayers {np.median(flow_times) * 1e3:.0f} ms, "
              f"hand-written {np.median(hand_times) * 1e3:.0f} ms, loss gap after {2 + args.steps} steps "
              f"{loss_gap:.1e}", flush=True)
        del model, hand

    def spread(times):
        return f"{min(times) * 1e3:.0f}-{max(times) * 1e3:.0f}"

    lines = [f"# GPT: flowlayers vs hand-written TF DTensor, same process ({datetime.date.today()})", "",
             f"{platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}, TensorFlow "
             f"{tf.__version__}; tutorial 07's GPT: width {args.width}, {args.heads} heads, {args.blocks} blocks, "
             f"sequence {args.seq}, vocabulary {args.vocab}, Adam 1e-3; batch {args.batch}. Command: "
             f"`python bench/bench_gpt_dtensor.py`. Four logical CPU devices share the cores. Each configuration "
             f"builds both models from the same initial weights, warms each up 2 steps, then alternates "
             f"{args.steps} timed steps of each (step = numpy batch in, loss out); samples/s from the median step.",
             "", f"Correctness: {check}.", "",
             "| configuration | flowlayers samples/s | hand-written samples/s | flowlayers / hand-written | "
             f"step ms min-max (flowlayers; hand-written) | loss gap after {2 + args.steps} steps |",
             "|---|---|---|---|---|---|"]
    for name, sizes, flow_times, hand_times, loss_gap in rows:
        flow_rate, hand_rate = args.batch / np.median(flow_times), args.batch / np.median(hand_times)
        lines.append(f"| {name} | {flow_rate:,.0f} | {hand_rate:,.0f} | {flow_rate / hand_rate:.2f} | "
                     f"{spread(flow_times)}; {spread(hand_times)} | {loss_gap:.1e} |")
    with open(args.out, "w") as f:
        f.write("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
