"""Writing a custom layer, and a custom op with its SBP signatures.

    python tutorials/06_custom_layer_and_op.py             # 2 devices
    python tutorials/06_custom_layer_and_op.py --devices 4 --smoke

Most new layers are made of existing ops, and then there is nothing to say
about devices: each op already knows how it may be split, and the planner
does the rest.  This tutorial writes such a layer (RMSNorm) first.

Sometimes you need an op flowlayers does not have.  An op has two halves,
as in Keras 3 and OneFlow: a *symbolic* half in the front end (shape and
dtype inference, and its SBP signatures -- the layouts it can compute
locally) and an *executing* half in each backend (a kernel: TensorFlow ops, or
jax.numpy on the jax backend).  The second part writes ``l2_normalize``, looks at the signatures the
planner picks for it, and checks that a model using both trains to the same
weights on N devices, in both views, as on one.
"""
import argparse
import time

import numpy as np

import flowlayers as flow
from flowlayers.framework.graph import apply
from flowlayers.framework.op_def import OpDef, Signature


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--devices", type=int, default=2, help="devices to use (logical CPUs stand in); default 2")
    parser.add_argument("--smoke", action="store_true", help="train a few steps only (a wiring check)")
    return parser.parse_args(argv)


# ---------------------------------------------------------------------------
# Part 1. A custom layer: RMSNorm, y = x / sqrt(mean(x^2) + eps) * gain.
#
# Layers are all alike: ``__init__`` validates and stores plain settings,
# ``build(input_shape)`` creates weights with ``add_weight`` (their path is
# ``<layer name>/<weight name>``), and ``call`` uses ops only -- ``self.read``
# turns a weight into a Blob.  No device, view or SBP appears anywhere.
# ---------------------------------------------------------------------------
class RMSNorm(flow.layers.Layer):
    def __init__(self, epsilon=1e-6, **kwargs):
        super().__init__(**kwargs)
        if not isinstance(epsilon, (int, float)) or epsilon <= 0:
            raise flow.LayerError(f"layer {self.name!r} (RMSNorm): epsilon expected a positive number, "
                                  f"received {epsilon!r}")
        self.epsilon = float(epsilon)

    def build(self, input_shape):
        self.gain = self.add_weight("gain", (input_shape[-1],), initializer="ones")

    def call(self, x):
        mean_square = flow.math.reduce_mean(x * x, axis=-1, keepdims=True)
        return x * flow.math.rsqrt(mean_square + self.epsilon) * self.read(self.gain)

    def get_config(self):
        return {**super().get_config(), "epsilon": self.epsilon}


# ---------------------------------------------------------------------------
# Part 2. A custom op: l2_normalize(x) = x / max(||x||, eps) over the last axis.
#
# The symbolic half is an OpDef, declared once, as data:
# - ``infer(inputs, attrs)`` returns [(shape, dtype)] per output.  Inputs are
#   Blobs (read ``.shape``, ``.dtype``, ``.ndim`` only).  A mistake raises a
#   flow error naming what was received; flowlayers adds the op's name.
# - ``signatures(inputs, attrs)`` lists, for ONE mesh axis, the input SBPs ->
#   output SBPs the op can compute with no communication.  Each row of x is
#   normalised on its own, so any axis but the last may be split: S(k) -> S(k).
#   The last axis may not (a device would see part of each row's norm), nor
#   may a partial sum (the op is not linear).  B -> B always works.  The
#   planner combines these per mesh axis on N-D meshes.
# ---------------------------------------------------------------------------
def _infer_l2_normalize(inputs, attrs):
    (x,) = inputs
    if not x.dtype.is_floating:
        raise flow.DTypeError(f"l2_normalize expected a floating input, received dtype {x.dtype}")
    return [(x.shape, x.dtype)]


def _l2_normalize_signatures(inputs, attrs):
    (x,) = inputs
    split_rows = [Signature((flow.sbp.split(k),), (flow.sbp.split(k),)) for k in range(x.ndim - 1)]
    return split_rows + [Signature((flow.sbp.broadcast,), (flow.sbp.broadcast,))]


L2_NORMALIZE = OpDef("l2_normalize", _infer_l2_normalize, _l2_normalize_signatures,
                     doc="x / max(||x||_2, eps) over the last axis")


def l2_normalize(x, epsilon=1e-12, name=None):
    """The user-facing function: checks its arguments and adds one node to the graph."""
    return apply(L2_NORMALIZE, [x], {"epsilon": float(epsilon)}, name)


# The executing half: a kernel per backend, found by the op's name.  It
# receives the node (its ``attrs``), the input arrays and a context, and
# returns the engine's arrays.  The engine differentiates it, so there is no
# gradient to write; in the consistent view its inputs are laid out as planned
# (DTensors on tensorflow, sharded jax.Arrays on jax), and the engine runs the
# same ops on every device's shard.
def register_kernel():
    if flow.config.backend_name() == "jax":
        import jax
        import jax.numpy as jnp
        from flowlayers_jax import register_kernel as kernel_for

        @kernel_for("l2_normalize", replace=True)   # replace: this function may run twice in one process
        def l2_normalize_jax(node, x, ctx):
            squares = jnp.sum(jnp.square(x), axis=-1, keepdims=True)
            return x * jax.lax.rsqrt(jnp.maximum(squares, node.attrs["epsilon"]))
        return

    import tensorflow as tf
    from flowlayers_tensorflow import register_kernel as kernel_for

    @kernel_for("l2_normalize", replace=True)
    def l2_normalize_kernel(node, x, ctx):
        return tf.math.l2_normalize(x, axis=-1, epsilon=node.attrs["epsilon"])


# ---------------------------------------------------------------------------
# Part 3. What the planner does with those signatures.
# ---------------------------------------------------------------------------
def show_signatures(devices):
    flow.config.set_view("consistent")
    flow.config.gpu_device_num(devices)
    x = flow.Input((32,), batch_size=64)
    print(f"  x: {x.shape} sbp {x.sbp}")
    print(f"  l2_normalize(x): sbp {l2_normalize(x).sbp}   (rows split, as the batch is)")
    # Force the input to be split by columns.  The op cannot compute on that,
    # so Boxing converts it first, to whichever legal layout costs the fewest
    # bytes: an all-to-all to S(0) is cheaper than an all-gather to B.
    by_columns = x.with_sbp(flow.sbp.split(1))
    print(f"  x split by columns: sbp {by_columns.sbp} -> l2_normalize: sbp {l2_normalize(by_columns).sbp}")
    # A mistake in a graph names the op and what it received.
    try:
        l2_normalize(flow.Input((32,), dtype=flow.int32))
    except flow.FlowLayersError as e:
        print(f"  an int input is refused: {type(e).__name__}: {e}")


# ---------------------------------------------------------------------------
# Part 4. Use both in a model; train it in three places; compare.
# ---------------------------------------------------------------------------
def build_model():
    flow.clear_session()          # the same layer names, so the same initial values, in every place
    x = flow.Input((1, 8, 8))
    h = flow.layers.Flatten()(x)
    h = flow.layers.Dense(64)(h)
    h = flow.nn.relu(RMSNorm(name="rms_norm")(h))
    features = l2_normalize(h)    # a custom op is used like any other, also between layers
    model = flow.Model(x, flow.layers.Dense(10)(features * 8.0))
    model.compile(optimizer=flow.optimizers.SGD(0.1, momentum=0.9),
                  loss=flow.losses.SparseCategoricalCrossentropy(from_logits=True), metrics=["accuracy"])
    # A second model over the same graph and weights, to look inside.
    probe = flow.Model(x, [h, features])
    return model, probe


def train_in(view, devices, data, epochs):
    flow.config.set_view(view)
    flow.config.gpu_device_num(devices)
    (x, y), (x_test, y_test) = data
    model, probe = build_model()
    model.fit(x, y, batch_size=64, epochs=1, verbose=0)
    after_one_epoch = model.get_weights()     # compared across places (see tutorial 02 for why after one)
    model.fit(x, y, batch_size=64, epochs=epochs, initial_epoch=1, verbose=0)
    _, accuracy = model.evaluate(x_test, y_test, batch_size=128, verbose=0)
    return after_one_epoch, probe, accuracy


def main(argv=None):
    args = parse_args(argv)
    start = time.perf_counter()
    register_kernel()

    print("== signatures the planner picks for l2_normalize")
    show_signatures(args.devices)

    print("== a model with RMSNorm and l2_normalize, in three places")
    (x, y), test = flow.data.load_digits()
    if args.smoke:
        x, y = x[:256], y[:256]
    epochs = 1 if args.smoke else 5
    places = [("mirrored", 1), ("mirrored", args.devices), ("consistent", args.devices)]
    results = {place: train_in(*place, ((x, y), test), epochs) for place in places}
    reference = results[("mirrored", 1)][0]
    worst = 0.0
    for (view, n), (weights, _, accuracy) in results.items():
        diff = max(float(np.abs(a - b).max()) for a, b in zip(weights, reference))
        worst = max(worst, diff)
        print(f"  {view:<11} {n} device(s): test accuracy {accuracy:.4f}, "
              f"max |w - w(1 device)| after epoch 1: {diff:.2e}")
    print(f"same weights in every place (to 1e-5): {worst < 1e-5}")

    # The custom op against plain numpy, inside the N-device consistent model.
    probe = results[("consistent", args.devices)][1]
    rows, features = probe.predict(test[0][:64], verbose=0)
    expected = rows / np.maximum(np.linalg.norm(rows, axis=-1, keepdims=True), 1e-12)
    print(f"l2_normalize vs numpy on {args.devices} devices: max |diff| {np.abs(features - expected).max():.2e}")
    print(f"done in {time.perf_counter() - start:.1f}s")


if __name__ == "__main__":
    main()
