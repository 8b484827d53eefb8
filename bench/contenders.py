"""The same model, trained by each contender: flowlayers (Keras face and job-function face), plain Keras 3,
Keras 3 + ``tf.distribute.MirroredStrategy``, a hand-written TF DTensor loop with the split step, and plain TF with
no framework (one copy of the variables read by every device: the least work data parallelism can do).

A model is a spec, a list of layers::

    [("conv", "conv1", 32, 5), ("pool",), ("flatten",), ("dense", "fc1", 512, "relu"), ("dense", "out", 10, None)]

``make(contender, spec, ...)`` returns a trainer with ``epoch(x, y)`` (one pass, batch 100, no shuffling, SGD
momentum 0.9, learning rate 0.1, softmax cross-entropy) and ``step(x, y)`` (one batch).  Only the bench imports
this; it must run in a process whose logical CPU devices are already configured.
"""
import re

import numpy as np

BATCH, LR, MOMENTUM = 100, 0.1, 0.9

LENET = [("conv", "conv1", 32, 5), ("pool",), ("conv", "conv2", 64, 5), ("pool",), ("flatten",),
         ("dense", "fc1", 512, "relu"), ("dense", "out", 10, None)]
MLP = [("dense", f"fc{i}", 1024, "relu") for i in range(1, 5)] + [("dense", "out", 10, None)]
DEEP = [("dense", f"fc{i}", 128, "relu") for i in range(1, 200)] + [("dense", "out", 10, None)]
MODELS = {"lenet": (LENET, (28, 28, 1)), "mlp": (MLP, (784,)), "deep": (DEEP, (784,))}
# Megatron-style 4-way model parallelism of the MLP: column-split fc1/fc3, row-split fc2/fc4
MODEL_PARALLEL_RULES = {r"^fc[13]/kernel$": (None, "model"), r"^fc[13]/bias$": ("model",),
                        r"^fc[24]/kernel$": ("model", None)}


def make(contender, spec, input_shape, devices=1, view=None, mesh=None, rules=None):
    """A trainer for ``contender`` in flow_keras | flow_job | keras | keras_mirrored | dtensor."""
    mesh = mesh or {"data": devices}
    return {"flow_keras": FlowKeras, "flow_job": FlowJob, "keras": Keras, "keras_mirrored": Keras,
            "dtensor": DTensorLoop, "plain_tf": PlainTF}[contender](spec, input_shape, devices, view, mesh,
                                                                    rules or {}, mirrored=contender == "keras_mirrored")


def batches(x, y):
    for i in range(0, len(x) - BATCH + 1, BATCH):
        yield x[i:i + BATCH], y[i:i + BATCH]


class KerasStyle:
    """A model of ``spec`` built, compiled and fitted through a Keras-style API: ``flowlayers`` and ``keras``
    alike (flowlayers' Keras face mirrors Keras' names)."""

    def __init__(self, api, spec, input_shape):
        x = h = api.Input(input_shape, batch_size=BATCH)
        for kind, *args in spec:
            if kind == "conv":
                h = api.layers.Conv2D(args[1], args[2], padding="same", activation="relu", name=args[0])(h)
            elif kind == "pool":
                h = api.layers.MaxPool2D(2)(h)
            elif kind == "flatten":
                h = api.layers.Flatten()(h)
            else:
                h = api.layers.Dense(args[1], activation=args[2], name=args[0])(h)
        self.model = api.Model(x, h)
        self.model.compile(optimizer=api.optimizers.SGD(LR, momentum=MOMENTUM),
                           loss=api.losses.SparseCategoricalCrossentropy(from_logits=True))

    def epoch(self, x, y):
        self.model.fit(x, y, batch_size=BATCH, epochs=1, verbose=0, shuffle=False)

    step = epoch


# flowlayers ---------------------------------------------------------------------------------------------------
def _flow_config(devices, view, mesh, rules):
    import flowlayers as flow

    flow.clear_session()
    flow.config.set_view(view or "consistent")
    flow.config.gpu_device_num(devices)
    flow.config.set_mesh(**mesh)
    flow.config.set_layout_rules(rules)
    return flow


class FlowKeras(KerasStyle):
    def __init__(self, spec, input_shape, devices, view, mesh, rules, **_):
        super().__init__(_flow_config(devices, view, mesh, rules), spec, input_shape)


class FlowJob:
    def __init__(self, spec, input_shape, devices, view, mesh, rules, **_):
        flow = _flow_config(devices, view, mesh, rules)
        import flowlayers.typing as tp

        cfg = flow.function_config()
        cfg.default_logical_view(flow.scope.mirrored_view() if view == "mirrored" else flow.scope.consistent_view())

        @flow.global_function(type="train", function_config=cfg)
        def train_job(images: tp.Numpy.Placeholder((BATCH,) + tuple(input_shape)),
                      labels: tp.Numpy.Placeholder((BATCH,), dtype=flow.int32)) -> tp.Numpy:
            h = images
            for kind, *args in spec:
                if kind == "conv":
                    h = flow.layers.conv2d(h, args[1], args[2], padding="SAME", data_format="NHWC",
                                           activation=flow.nn.relu, name=args[0])
                elif kind == "pool":
                    h = flow.nn.max_pool2d(h, 2, 2, "VALID", data_format="NHWC")
                elif kind == "flatten":
                    h = flow.reshape(h, [BATCH, -1])
                else:
                    act = flow.nn.relu if args[2] == "relu" else None
                    h = flow.layers.dense(h, args[1], activation=act, name=args[0])
            loss = flow.nn.sparse_softmax_cross_entropy_with_logits(labels, h)
            flow.optimizer.SGD(flow.optimizer.PiecewiseConstantScheduler([], [LR]), momentum=MOMENTUM).minimize(loss)
            return loss

        self.job = train_job

    def step(self, x, y):
        return self.job(x, y)

    def epoch(self, x, y):
        for xb, yb in batches(x, y):
            self.job(xb, yb)


# Keras 3 ------------------------------------------------------------------------------------------------------
class Keras(KerasStyle):
    """Plain Keras 3 on one device, or under ``MirroredStrategy`` over the logical CPU devices."""

    def __init__(self, spec, input_shape, devices, view, mesh, rules, mirrored=False):
        import contextlib

        import keras
        import tensorflow as tf

        scope = contextlib.nullcontext()
        if mirrored:
            scope = tf.distribute.MirroredStrategy([f"/cpu:{i}" for i in range(devices)]).scope()
        with scope:
            super().__init__(keras, spec, input_shape)


# A hand-written DTensor loop ------------------------------------------------------------------------------------
class DTensorLoop:
    """What a user writes on raw TF DTensor: DVariables with layouts, tf.nn ops, and the split step (gradients
    in one tf.function, the momentum update in another: fused, TF 2.21 silently skips DVariable updates)."""

    def __init__(self, spec, input_shape, devices, view, mesh, rules, **_):
        import tensorflow as tf
        from tensorflow.experimental import dtensor

        self.tf, self.dtensor = tf, dtensor
        self.mesh = dtensor.create_mesh(list(mesh.items()), devices=[f"CPU:{i}" for i in range(devices)],
                                        device_type="CPU")
        self.axes = list(mesh)
        self.spec, self.params, self.slots = spec, {}, []
        for path, value in initial_values(tf, spec, input_shape):
            self._param(path, value, rules)
        self.variables = list(self.params.values())
        self.grads_fn = tf.function(self._grads, autograph=False)
        self.apply_fn = tf.function(self._apply, autograph=False)

    def _param(self, path, value, rules):
        tf, dtensor = self.tf, self.dtensor
        shape = tuple(value.shape)
        spec = next((s for p, s in rules.items() if re.search(p, path)), (None,) * len(shape))
        layout = dtensor.Layout([a or dtensor.UNSHARDED for a in spec], self.mesh)
        replicated = dtensor.Layout.replicated(self.mesh, len(shape))
        value = dtensor.relayout(dtensor.copy_to_mesh(value, replicated), layout)
        self.params[path] = dtensor.DVariable(value)
        self.slots.append(dtensor.DVariable(dtensor.relayout(dtensor.copy_to_mesh(tf.zeros(shape), replicated),
                                                             layout)))

    def _grads(self, x, y):
        tf = self.tf
        with tf.GradientTape() as tape:
            loss = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(y, forward(tf, self.params,
                                                                                             self.spec, x)))
        return loss, tape.gradient(loss, self.variables)

    def _apply(self, grads):
        for var, slot, grad in zip(self.variables, self.slots, grads):
            slot.assign(MOMENTUM * slot - LR * grad)
            var.assign_add(slot)

    def _pack(self, a):
        """The global batch -> a DTensor split over ``data`` (replicated over any other mesh axis)."""
        tf, dtensor = self.tf, self.dtensor
        n = self.mesh.size
        data = dict(zip(self.axes, self.mesh.shape()))
        parts = np.split(a, data["data"]) if "data" in data else [a]
        stride = n // len(parts)
        layout = dtensor.Layout((["data"] if "data" in data else [dtensor.UNSHARDED]) +
                                [dtensor.UNSHARDED] * (a.ndim - 1), self.mesh)
        return dtensor.pack([tf.constant(parts[i // stride]) for i in range(n)], layout)

    def step(self, x, y):
        with self.dtensor.default_mesh(self.mesh):
            loss, grads = self.grads_fn(self._pack(x), self._pack(y))
            self.apply_fn(grads)
        return float(self.dtensor.unpack(loss)[0].numpy())

    def epoch(self, x, y):
        for xb, yb in batches(x, y):
            self.step(xb, yb)


# Plain TensorFlow, no framework: the ceiling ---------------------------------------------------------------------
class PlainTF:
    """The least work data parallelism can do on N logical CPU devices, written in plain TF with no framework:
    each device computes the gradients of its rows of the batch from ONE copy of the variables on the first device
    (devices of one host memory read it in place), the first device sums them and applies SGD momentum once.  On one
    device it is a plain TF training step.  No framework over the same devices can beat it by much: its ratio to
    one device is the practical ceiling for data parallelism on this machine."""

    def __init__(self, spec, input_shape, devices, view, mesh, rules, **_):
        import tensorflow as tf

        self.tf, self.spec, self.n = tf, spec, devices
        self.devices = [f"/device:CPU:{i}" for i in range(devices)]
        with tf.device(self.devices[0]):
            self.params = {path: tf.Variable(value) for path, value in initial_values(tf, spec, input_shape)}
            self.slots = [tf.Variable(tf.zeros_like(v)) for v in self.params.values()]
        self.variables = list(self.params.values())
        self.step_fn = tf.function(self._step, autograph=False)

    def _step(self, xs, ys):
        tf = self.tf
        grads = []
        for device, x, y in zip(self.devices, xs, ys):
            with tf.device(device), tf.GradientTape() as tape:
                logits = forward(tf, self.params, self.spec, x)
                loss = tf.reduce_sum(tf.nn.sparse_softmax_cross_entropy_with_logits(y, logits)) / BATCH
            grads.append(tape.gradient(loss, self.variables))
        with tf.device(self.devices[0]):
            for var, slot, *per_device in zip(self.variables, self.slots, *grads):
                grad = tf.add_n(per_device) if len(per_device) > 1 else per_device[0]
                tf.raw_ops.ResourceApplyKerasMomentum(var=var.handle, accum=slot.handle, lr=LR, grad=grad,
                                                      momentum=MOMENTUM, use_nesterov=False)
        return loss

    def step(self, x, y):
        tf = self.tf
        parts = [np.array_split(a, self.n) for a in (x, y)]
        placed = []
        for pieces in parts:
            placed.append([])
            for device, piece in zip(self.devices, pieces):
                with tf.device(device):
                    placed[-1].append(tf.constant(piece))
        return float(self.step_fn(*placed))

    def epoch(self, x, y):
        for xb, yb in batches(x, y):
            self.step(xb, yb)


# What the hand-written contenders share ------------------------------------------------------------------------
def initial_values(tf, spec, input_shape):
    """(path, initial value) of every parameter of ``spec``: Glorot-uniform kernels, zero biases."""
    shape, out = tuple(input_shape), []
    for i, (kind, *args) in enumerate(spec):
        if kind == "pool":
            shape = (shape[0] // 2, shape[1] // 2, shape[2])
            continue
        if kind == "flatten":
            shape = (int(np.prod(shape)),)
            continue
        kernel = (args[2], args[2], shape[-1], args[1]) if kind == "conv" else (shape[-1], args[1])
        limit = float(np.sqrt(6.0 / (np.prod(kernel[:-1]) + kernel[-1] * np.prod(kernel[:-2]))))
        out.append((f"{args[0]}/kernel", tf.random.stateless_uniform(kernel, [i, 0], -limit, limit)))
        out.append((f"{args[0]}/bias", tf.zeros((args[1],))))
        shape = shape[:-1] + (args[1],) if kind == "conv" else (args[1],)
    return out


def forward(tf, params, spec, x):
    """Logits of the ``spec`` model with ``params`` (path -> variable) for NHWC or flat inputs ``x``."""
    for kind, *args in spec:
        if kind == "conv":
            x = tf.nn.relu(tf.nn.conv2d(x, params[f"{args[0]}/kernel"], 1, "SAME") + params[f"{args[0]}/bias"])
        elif kind == "pool":
            x = tf.nn.max_pool2d(x, 2, 2, "VALID")
        elif kind == "flatten":
            x = tf.reshape(x, (x.shape[0], -1))
        else:
            x = tf.matmul(x, params[f"{args[0]}/kernel"]) + params[f"{args[0]}/bias"]
            x = tf.nn.relu(x) if args[2] == "relu" else x
    return x
