"""User mistakes: each raises a FlowLayersError subclass whose message names the thing, the expected and the
received value, and afterwards the same model (or job function) trains on to exactly the weights of a run
that never saw the mistake.

One table, CASES.  Each case runs in the views it lists: mirrored on one device and a 2-device view, or only
the consistent view on 2 devices for mistakes that exist only there (mesh, layout rules).  A case makes its
mistake between two epochs, or (``first``) before the first step, where build-time checks (layout rules) run.
"""
import os
import subprocess
import sys
import textwrap
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Optional

import numpy as np
import pytest

import flowlayers as flow
import flowlayers.typing as tp
from flowlayers.framework.variable import store

M1, M2, C2 = ("mirrored", 1), ("mirrored", 2), ("consistent", 2)
BATCH = 16
ERRORS = {flow.ConfigError: ValueError, flow.ShapeError: ValueError, flow.DTypeError: TypeError,
          flow.InputError: ValueError, flow.LayerError: ValueError, flow.GraphError: ValueError,
          flow.SBPError: ValueError, flow.CheckpointError: ValueError, flow.EngineError: RuntimeError}


def keras_model(hidden=5):
    x = flow.Input((1, 8, 8))
    h = flow.layers.Dense(hidden, activation="relu", name="hidden")(flow.layers.Flatten()(x))
    model = flow.Model(x, flow.layers.Dense(10, name="head")(h))
    model.compile(optimizer=flow.optimizers.Adam(0.01), loss="sparse_categorical_crossentropy")
    return model


def train_job(view, n):
    cfg = flow.function_config()
    cfg.default_logical_view(flow.scope.mirrored_view() if view == "mirrored" else flow.scope.consistent_view())
    Ph = tp.ListNumpy.Placeholder if view == "mirrored" else tp.Numpy.Placeholder
    per = BATCH // n if view == "mirrored" else BATCH

    @flow.global_function(type="train", function_config=cfg)
    def train_job(images: Ph((per, 1, 8, 8)), labels: Ph((per,), dtype=flow.int32)) -> tp.Numpy:
        hidden = flow.layers.dense(flow.reshape(images, [per, 64]), 5, activation="relu", name="hidden")
        loss = flow.nn.sparse_softmax_cross_entropy_with_logits(labels, flow.layers.dense(hidden, 10, name="head"))
        flow.optimizer.Adam(flow.optimizer.PiecewiseConstantScheduler([], [0.01])).minimize(loss)
        return loss
    return train_job


class Run:
    """One training run in one view: 32 digits, and a Keras model or a job function trained on them."""

    def __init__(self, face, view, n, tmp=None, monkeypatch=None):
        flow.clear_session()
        flow.config.set_view(view)
        flow.config.gpu_device_num(n)
        self.face, self.view, self.n, self.tmp, self.monkeypatch = face, view, n, tmp, monkeypatch
        (x, y), _ = flow.data.load_digits()
        self.x, self.y = x[:32], y[:32]
        self.per = BATCH // n if view == "mirrored" else BATCH   # rows of one fed array (job face)
        self.model = keras_model() if face == "keras" else None
        self.job = train_job(view, n) if face == "job" else None

    def epoch(self):
        if self.face == "keras":
            self.model.fit(self.x, self.y, batch_size=BATCH, epochs=1, verbose=0)
            return
        for i in range(0, len(self.x), BATCH):
            self.job(*(self.split(a[i:i + BATCH]) for a in (self.x, self.y)))

    def split(self, a):
        """A batch as the job takes it: one array per device in the mirrored view."""
        return list(np.split(a, self.n)) if self.view == "mirrored" else a

    def copies(self, a):
        """``a`` fed to every device (mirrored view) or as the whole batch."""
        return [a] * self.n if self.view == "mirrored" else a

    def weights(self):
        if self.face == "keras":
            return self.model.get_weights()
        return [store.variables[p].numpy() for p in ("hidden/kernel", "hidden/bias", "head/kernel", "head/bias")]


_undisturbed = {}


def undisturbed(face, view, n):
    if (face, view, n) not in _undisturbed:
        run = Run(face, view, n)
        run.epoch()
        run.epoch()
        _undisturbed[face, view, n] = run.weights()
    return _undisturbed[face, view, n]


def devices_here():
    import tensorflow as tf

    return len(tf.config.list_physical_devices("GPU")) or len(tf.config.list_logical_devices("CPU"))


# Mistakes that need more than one line ---------------------------------------------------------------------
def fit(r, x, y):
    r.model.fit(x, y, batch_size=BATCH, epochs=1, verbose=0)


def backend_in_environment(name):
    """``$FLOWLAYERS_BACKEND`` set to ``name``, then an epoch; the value it had (the backend under test, or unset
    for the default) is kept for ``restore_backend_in_environment``."""
    def mistake(r):
        r.backend_env = os.environ.get("FLOWLAYERS_BACKEND")
        r.monkeypatch.setenv("FLOWLAYERS_BACKEND", name)
        r.epoch()
    return mistake


def restore_backend_in_environment(r):
    if r.backend_env is None:
        r.monkeypatch.delenv("FLOWLAYERS_BACKEND")
    else:
        r.monkeypatch.setenv("FLOWLAYERS_BACKEND", r.backend_env)


def rules_then_fit(rules):
    def mistake(r):
        flow.config.set_layout_rules(rules)
        r.epoch()
    return mistake


def fit_embedding_with_bad_ids(r):
    ids = flow.Input((4,), dtype=flow.int32)
    words = flow.layers.Embedding(10, 3, name="words")(ids)
    model = flow.Model(ids, flow.layers.Dense(2)(flow.layers.Flatten()(words)))
    model.compile("sgd", "sparse_categorical_crossentropy")
    model.fit(np.full((8, 4), 12, np.int32), np.zeros(8, np.int32), verbose=0)


def load_other_architecture(r):
    other = keras_model(hidden=7)
    other.save_weights(r.tmp / "other")
    r.model.load_weights(r.tmp / "other")


def load_truncated(r):
    r.model.save_weights(r.tmp / "ckpt")
    damaged = max((r.tmp / "ckpt").rglob("*.npy"), key=lambda f: f.stat().st_size)
    damaged.write_bytes(damaged.read_bytes()[:damaged.stat().st_size // 2])
    r.damaged = damaged.name
    r.model.load_weights(r.tmp / "ckpt")


def faulty_matmul_kernel(backend):
    """A kernel for the ``faulty_matmul`` op below, written with the engine's own ops: a (5, 3) matrix where the
    input has 4 features."""
    if backend == "jax":
        import jax.numpy as jnp

        return lambda node, x, ctx: jnp.matmul(x, jnp.ones((5, 3), x.dtype))
    import tensorflow as tf

    return lambda node, x, ctx: tf.matmul(x, tf.ones((5, 3)))


#: how each engine's rejection of that kernel names the two sizes
FAULTY_SIZES = {"tensorflow": "4 and 5", "jax": "(4,) and (5,)"}


def fit_model_with_faulty_kernel(r):
    """A custom op whose kernel is wrong: the engine in force rejects it while the step is traced."""
    from flowlayers.framework.graph import apply
    from flowlayers.framework.op_def import OpDef, Signature
    from flowlayers.sbp import broadcast

    backend = flow.config.backend_name()
    if backend not in FAULTY_SIZES:
        pytest.skip(f"no faulty kernel written for backend {backend!r}")
    op = OpDef("faulty_matmul", lambda inputs, attrs: [(inputs[0].shape[:-1] + (3,), inputs[0].dtype)],
               lambda inputs, attrs: [Signature((broadcast,), (broadcast,))])
    r.monkeypatch.setitem(flow.engine.backend().kernels, "faulty_matmul", faulty_matmul_kernel(backend))

    class Faulty(flow.layers.Layer):
        def call(self, x):
            return apply(op, [x], {})

    x = flow.Input((4,))
    model = flow.Model(x, Faulty(name="faulty")(x))
    model.compile("sgd", "mse")
    model.fit(np.ones((8, 4), np.float32), np.ones((8, 3), np.float32), verbose=0)


def fit_model_dtensor_cannot_lay_out(r):
    """A custom op whose kernel's gradient (SoftsignGrad) has no DTensor layout rule: the step cannot compile."""
    import tensorflow as tf
    from flowlayers.framework.graph import apply
    from flowlayers.framework.op_def import OpDef
    from flowlayers.ops import rules
    from flowlayers_tensorflow.kernels import KERNELS

    op = OpDef("raw_softsign", lambda inputs, attrs: [(inputs[0].shape, inputs[0].dtype)],
               lambda inputs, attrs: rules.pointwise(inputs, inputs[0].shape))
    r.monkeypatch.setitem(KERNELS, "raw_softsign", lambda node, x, ctx: tf.math.softsign(x))

    class Soft(flow.layers.Layer):
        def call(self, x):
            return apply(op, [x], {})

    x = flow.Input((4,))
    model = flow.Model(x, flow.layers.Dense(3)(Soft(name="soft")(flow.layers.Dense(8)(x))))
    model.compile("sgd", "mse")
    model.fit(np.ones((8, 4), np.float32), np.ones((8, 3), np.float32), verbose=0)


def fit_model_failing_while_running(r):
    """Ids computed in the graph (host checks cannot see them) go out of range: TF fails while the step runs."""
    class Shift(flow.layers.Layer):
        def call(self, x):
            return x + 7

    ids = flow.Input((4,), dtype=flow.int32)
    words = flow.layers.Embedding(10, 3, name="words")(Shift(name="shift")(ids))
    model = flow.Model(ids, flow.layers.Dense(2)(flow.layers.Flatten()(words)))
    model.compile("sgd", "sparse_categorical_crossentropy")
    model.fit(np.arange(32, dtype=np.int32).reshape(8, 4) % 5, np.zeros(8, np.int32), verbose=0)


def list_placeholder_job(r):
    @flow.global_function(type="predict")
    def peek(images: tp.ListNumpy.Placeholder((8, 64))) -> tp.Numpy:
        return images
    peek([r.x[:8].reshape(8, 64)] * r.n)


def out_of_range(r):
    r.bad_labels = r.y[:r.per] + 10
    r.job(r.copies(r.x[:r.per]), r.copies(r.bad_labels))


def load_model_of_custom_layer(r):
    class Twice(flow.layers.Layer):
        def call(self, x):
            return x * 2.0

    x = flow.Input((3,))
    flow.Model(x, Twice(name="twice")(x)).save(r.tmp / "custom")
    flow.models.load_model(r.tmp / "custom")


def load_model_of_weights_only(r):
    r.model.save_weights(r.tmp / "weights")
    flow.models.load_model(r.tmp / "weights")


def job_with(body):
    """A predict job function whose body makes the mistake while it is built (at its first call)."""
    def mistake(r):
        @flow.global_function(type="predict")
        def mistaken(x: tp.Numpy.Placeholder((4, 8))) -> tp.Numpy:
            return body(x)
        mistaken(np.zeros((4, 8), np.float32))
    return mistake


def split_job(r):
    x = flow.Input((4,))
    flow.config.set_mesh(data=1, model=2)
    try:
        flow.Model(x, flow.layers.Dense(2)(x)).outputs[0].with_distribute(flow.distribute.split(0))
    finally:
        flow.config.set_mesh()


def _placed(x, devices):
    with flow.scope.placement("cpu", devices):
        return flow.layers.dense(x, 2, name="placed")


def load_variables_mismatch(r):
    flow.load_variables({"hidden/kernel": np.zeros((3, 3), np.float32)}, ignore_mismatch=False)


@dataclass
class Case:
    id: str
    mistake: Callable              # (run) -> raises
    error: type
    words: Callable                # (run) -> what the message must name: the object, the expected, the received
    hint: str                      # a distinctive fragment of the message's "how to fix it"
    views: tuple = (M1, C2)
    face: str = "keras"
    fix: Optional[Callable] = None  # (run) -> undoes a setting that is rejected only where it is used
    first: bool = False             # made before the first step
    engine: Optional[str] = None    # the backend whose words the message checks (its device check, its errors)

    def marks(self):
        """The case runs where its backend is the one under test (``tensorflow_backend``, ``jax_backend``)."""
        return [getattr(pytest.mark, f"{self.engine}_backend")] if self.engine else []


CASES = [
    # Config: rejected when set, so there is nothing to undo
    Case("unknown_view", lambda r: flow.config.set_view("mirorred"), flow.ConfigError,
         lambda r: ("set_view", "'mirorred'", "'consistent'", "'mirrored'"), "use one of those names", views=(M1, M2)),
    Case("unknown_backend", lambda r: flow.config.set_backend("torch"), flow.ConfigError,
         lambda r: ("set_backend", "'torch'", str(flow.engine.available())), "install the package that provides it",
         views=(M1, M2)),
    Case("unknown_backend_in_environment", backend_in_environment("torch"), flow.ConfigError,
         lambda r: ("FLOWLAYERS_BACKEND", "'torch'", str(flow.engine.available())),
         "install the package that provides it", views=(M1, M2), fix=restore_backend_in_environment),
    Case("optimizer_two_clippings", lambda r: flow.optimizers.SGD(0.1, clipnorm=1.0, clipvalue=0.5), flow.ConfigError,
         lambda r: ("SGD", "only one of clipnorm, clipvalue and global_clipnorm", "clipnorm=1.0", "clipvalue=0.5"),
         "keep one", views=(M1, M2)),
    Case("optimizer_negative_clipvalue", lambda r: flow.optimizers.Adam(0.01, clipvalue=-1), flow.ConfigError,
         lambda r: ("Adam", "clipvalue", "number >= 0", "-1"), "or None for no clipping", views=(M1, M2)),
    Case("optimizer_clipnorm_while_accumulating",
         lambda r: flow.optimizers.Adam(0.01, global_clipnorm=1.0, gradient_accumulation_steps=2), flow.ConfigError,
         lambda r: ("Adam", "clipping by norm", "gradient_accumulation_steps"), "or clipvalue", views=(M1, M2)),
    Case("exclude_from_weight_decay_too_late",
         lambda r: r.model.optimizer.exclude_from_weight_decay(var_names=["bias"]), flow.ConfigError,
         lambda r: (f"{type(r.model.optimizer).__name__}.exclude_from_weight_decay", "before the optimizer's first step",
                    "after"), "right after making the optimizer", views=(M1, C2)),
    Case("optimizer_unknown_keyword", lambda r: flow.optimizers.SGD(0.1, momentun=0.9), flow.ConfigError,
         lambda r: ("SGD", "unexpected keyword", "'momentun'"), "check the spelling", views=(M1, M2)),
    Case("optimizer_negative_weight_decay", lambda r: flow.optimizers.Adam(0.01, weight_decay=-0.1), flow.ConfigError,
         lambda r: ("Adam", "weight_decay", "number >= 0", "-0.1"), "or None for no decay", views=(M1, M2)),
    Case("rmsprop_momentum", lambda r: flow.optimizers.RMSprop(momentum=2), flow.ConfigError,
         lambda r: ("RMSprop", "momentum", "[0, 1]", "received 2"), "pass 0.0 for none", views=(M1, M2)),
    Case("zero_devices", lambda r: flow.config.gpu_device_num(0), flow.ConfigError,
         lambda r: ("gpu_device_num", "positive int", "received 0"), "a count of at least 1", views=(M1, M2)),
    Case("negative_devices", lambda r: flow.config.gpu_device_num(-2), flow.ConfigError,
         lambda r: ("gpu_device_num", "positive int", "received -2"), "a count of at least 1", views=(M1, M2)),
    Case("more_devices_than_exist", lambda r: flow.config.gpu_device_num(64), flow.ConfigError,
         lambda r: ("gpu_device_num(64)", f"at most {devices_here()} devices", "received 64"),
         "in a new process set FLOWLAYERS_CPU_DEVICES=64", views=(M1, M2), engine="tensorflow"),
    Case("mesh_larger_than_devices", lambda r: flow.config.set_mesh(data=8, model=8), flow.ConfigError,
         lambda r: ("set_mesh(data=8, model=8)", f"at most {devices_here()} devices", "received 64"),
         "use at most", views=(M1, C2), engine="tensorflow"),
    Case("mesh_not_matching_device_count", lambda r: (flow.config.set_mesh(data=1, model=1), r.epoch()),
         flow.ConfigError, lambda r: ("set_mesh(data=1, model=1)", f"device count {r.n} already set",
                                      "mesh of 1 device"),
         "set a mesh of 2 devices", views=(C2,)),
    Case("device_count_not_matching_mesh",
         lambda r: (flow.config.set_mesh(data=1, model=2), flow.config.gpu_device_num(1), r.epoch()),
         flow.ConfigError, lambda r: ("set_mesh(data=1, model=2)", "device count 1", "mesh of 2 device"),
         "or set_mesh() for one 'data' axis", views=(C2,),
         fix=lambda r: (flow.config.set_mesh(), flow.config.gpu_device_num(2))),
    Case("layout_rule_bad_regex", lambda r: flow.config.set_layout_rules({"hidden/(kernel": (None, "data")}),
         flow.ConfigError, lambda r: ("'hidden/(kernel'", "regular expression", "fails"),
         "escape characters meant literally with a backslash", views=(M1, M2)),
    Case("layout_rule_spec_not_a_tuple", lambda r: flow.config.set_layout_rules({"hidden/kernel": "data"}),
         flow.ConfigError, lambda r: ("'hidden/kernel'", "tuple", "'data'"), "write e.g. (None, 'model')",
         views=(M1, M2)),
    # Layout rules: rejected at build time, before any step
    Case("layout_rule_matching_nothing", rules_then_fit({"nowhere/kernel": (None, "data")}), flow.SBPError,
         lambda r: ("'nowhere/kernel'", "expected to match at least one variable", "received none among",
                    "'hidden/kernel'", "'head/bias'"), "fix the pattern or remove the rule", views=(C2,), first=True,
         fix=lambda r: flow.config.set_layout_rules({})),
    Case("layout_rule_unknown_mesh_axis", rules_then_fit({"hidden/kernel": (None, "model")}), flow.SBPError,
         lambda r: ("hidden/kernel", "'model'", "'data'"), "name an axis of flow.config.set_mesh", views=(C2,),
         first=True,
         fix=lambda r: flow.config.set_layout_rules({})),
    Case("layout_rule_two_dims_on_one_axis", rules_then_fit({"head/kernel": ("data", "data")}), flow.SBPError,
         lambda r: ("'head/kernel'", "at most one tensor dim", "('data', 'data')", "axis 'data' on two dims"),
         "keep 'data' on one dim", views=(C2,), first=True, fix=lambda r: flow.config.set_layout_rules({})),
    Case("layout_rule_split_not_dividing", rules_then_fit({"hidden/kernel": (None, "data")}), flow.SBPError,
         lambda r: ("'hidden/kernel'", "dim 1 of size 5", "mesh axis 'data' of size 2", "divides by 2"),
         "leave this variable replicated", views=(C2,), first=True,
         fix=lambda r: flow.config.set_layout_rules({})),
    # Layers
    Case("layer_input_rank", lambda r: flow.layers.Conv2D(4, 3, name="conv_a")(flow.Input((64,))), flow.ShapeError,
         lambda r: ("conv_a", "rank 4", "(None, 64)"), "reshape the input first"),
    Case("layer_feature_size", lambda r: r.model.get_layer("head")(flow.Input((7,))), flow.ShapeError,
         lambda r: ("'head'", "size 5", "(None, 7)"), "call a new layer for other sizes"),
    Case("layer_argument", lambda r: flow.layers.Dense(0, name="wide"), flow.LayerError,
         lambda r: ("'wide'", "positive int", "received 0"), "pass the number of output features"),
    # fit / predict data
    Case("fit_x_y_lengths", lambda r: fit(r, r.x, r.y[:-1]), flow.InputError,
         lambda r: ("Model 'model'.fit", "x and y with the same number of samples", "x with 32", "y with 31"),
         "one label per sample"),
    Case("labels_out_of_range", lambda r: fit(r, r.x, r.y + 10), flow.InputError,
         lambda r: ("sparse_categorical_crossentropy", "[0, 10)", "[10, 19]"), "remap the labels into [0, 10)"),
    Case("fit_feature_shape", lambda r: fit(r, r.x[:, :, :4], r.y), flow.InputError,
         lambda r: ("'input'", "(None, 1, 8, 8)", "(32, 1, 4, 8)"), "reshape the data to that"),
    Case("embedding_ids_out_of_range", fit_embedding_with_bad_ids, flow.InputError,
         lambda r: ("'words'", "'gather'", "[0, 10)", "[12, 12]"), "give the Embedding a larger input_dim"),
    Case("predict_rank", lambda r: r.model.predict(r.x.reshape(32, 64), verbose=0), flow.InputError,
         lambda r: ("'input'", "(None, 1, 8, 8)", "(32, 64)"), "reshape the data to that"),
    # Checkpoints: nothing is written unless everything checks
    Case("checkpoint_of_other_architecture", load_other_architecture, flow.CheckpointError,
         lambda r: ("hidden/kernel", "(64, 5)", "(64, 7)"), "load it into a model built like the one that saved it"),
    Case("checkpoint_truncated", load_truncated, flow.CheckpointError,
         lambda r: (r.damaged, "is damaged", "expected", "bytes with sha256", "received"),
         "restore the checkpoint from a copy or save it again"),
    # The engine: what the engine in force rejects is named after the layer and op
    Case("engine_error", fit_model_with_faulty_kernel, flow.EngineError,
         lambda r: ("'faulty'", "'faulty_matmul'", FAULTY_SIZES[flow.config.backend_name()]),
         "make it agree with the shapes and dtypes", views=(M1, M2, C2)),
    Case("engine_layout_error", fit_model_dtensor_cannot_lay_out, flow.EngineError,
         lambda r: ("step 'model.train'", "'soft'", "'raw_softsign'", "DTensor cannot lay this step out",
                    "'tf.SoftsignGrad' op does not implement layout propagation"),
         "write the op's kernel with TF ops DTensor can lay out", views=(C2,), engine="tensorflow"),
    Case("engine_error_while_running", fit_model_failing_while_running, flow.EngineError,
         lambda r: ("step 'model.train'", "failed in the engine", "'words'", "'gather'", "is not in [0, 10)"),
         "check the values this op receives", views=(M1, M2, C2), engine="tensorflow"),
    # Job functions
    Case("job_argument_count", lambda r: r.job(r.copies(r.x[:r.per])), flow.InputError,
         lambda r: ("'train_job'", "2 argument", "received 1"), "call it as train_job(images, labels)", face="job"),
    Case("placeholder_shape", lambda r: r.job(r.copies(r.x[:r.per - 1]), r.copies(r.y[:r.per])), flow.InputError,
         lambda r: ("'images", f"({r.per}, 1, 8, 8)", f"({r.per - 1}, 1, 8, 8)"),
         "drop or pad a short last batch", face="job"),
    Case("placeholder_rank", lambda r: r.job(r.copies(r.x[:r.per].reshape(r.per, 64)), r.copies(r.y[:r.per])),
         flow.InputError, lambda r: ("'images", "rank 4", "rank 2"), "reshape the array to the placeholder's shape",
         face="job"),
    Case("placeholder_dtype", lambda r: r.job(r.copies(r.x[:r.per].astype(np.float64)), r.copies(r.y[:r.per])),
         flow.DTypeError, lambda r: ("'images", "float32", "float64"), ".astype(np.float32)", face="job"),
    Case("placeholder_label_dtype",
         lambda r: r.job(r.copies(r.x[:r.per]), r.copies(r.y[:r.per].astype(np.float32))),
         flow.DTypeError, lambda r: ("'labels", "int32", "float32"), ".astype(np.int32)", face="job"),
    Case("job_labels_out_of_range", out_of_range, flow.InputError,
         lambda r: ("'labels'", "sparse_softmax_cross_entropy", "[0, 10)",
                    f"[{r.bad_labels.min()}, {r.bad_labels.max()}]"), "give the logits one column per class",
         face="job"),
    Case("mirrored_list_length", lambda r: r.job([r.x[:r.per]] * (r.n + 1), [r.y[:r.per]] * (r.n + 1)),
         flow.InputError, lambda r: ("'images'", f"list of {r.n} arrays", f"list of {r.n + 1}"),
         "pass one array per device", views=(M1, M2), face="job"),
    Case("mirrored_bare_array", lambda r: r.job(r.x[:BATCH], r.copies(r.y[:r.per])), flow.InputError,
         lambda r: ("'images'", "list", "ndarray"), "np.split(batch", views=(M1, M2), face="job"),
    Case("list_placeholder_in_consistent_view", list_placeholder_job, flow.GraphError,
         lambda r: ("'images'", "mirrored view", "'consistent'"), "use tp.Numpy.Placeholder", views=(C2,),
         face="job"),
    Case("job_devices_beyond_this_process", lambda r: flow.config.gpu_device_num(64), flow.ConfigError,
         lambda r: ("gpu_device_num(64)", f"at most {devices_here()} devices", "received 64"),
         "in a new process set FLOWLAYERS_CPU_DEVICES=64", face="job", engine="tensorflow"),
    # Keras face: arguments of fit, compile, save and load_model; layers' arguments
    Case("fit_unknown_keyword", lambda r: r.model.fit(r.x, r.y, epoch=2, verbose=0), flow.InputError,
         lambda r: ("Model 'model'.fit", "['epoch']"), "check the spelling against Keras' fit arguments"),
    Case("compile_unknown_keyword", lambda r: r.model.compile("sgd", "mse", metric=["acc"]), flow.InputError,
         lambda r: ("Model 'model'.compile", "['metric']"), "unexpected keyword"),
    Case("fit_labels_not_integral", lambda r: fit(r, r.x, r.y + 0.5), flow.InputError,
         lambda r: ("Model 'model'.fit", "y expected integer values", "non-integral value 6.5"),
         "class ids must be whole numbers"),
    Case("fit_sample_weight_length", lambda r: r.model.fit(r.x, r.y, sample_weight=np.ones(5), verbose=0),
         flow.InputError, lambda r: ("sample_weight", "32", "(5,)"), "one per sample"),
    Case("save_zipped", lambda r: r.model.save(r.tmp / "m", zipped=True), flow.ConfigError,
         lambda r: ("Model 'model'.save", "zipped=True", "zipped=None or False"), "a zip is a .keras path"),
    Case("save_weights_hdf5", lambda r: r.model.save_weights(r.tmp / "m.h5"), flow.CheckpointError,
         lambda r: ("save_weights", "m.h5", "a path ending in .weights.h5"), "model.save writes whole models"),
    Case("save_weights_overwrite", lambda r: (r.model.save_weights(r.tmp / "w"),
                                              r.model.save_weights(r.tmp / "w", overwrite=False)), flow.CheckpointError,
         lambda r: ("save_weights", "exists and overwrite=False", "a new path"), "pass overwrite=True"),
    Case("load_model_of_weights_only", load_model_of_weights_only, flow.CheckpointError,
         lambda r: ("load_model", "a whole model saved by model.save", "a checkpoint of weights only"),
         "rebuild the model in code and call load_weights"),
    Case("load_model_custom_layer", load_model_of_custom_layer, flow.CheckpointError,
         lambda r: ("layer 'twice'", "class 'Twice'", "not one of flowlayers'"), "custom_objects={'Twice': Twice}"),
    Case("load_model_custom_objects", lambda r: flow.models.load_model(r.tmp / "any", custom_objects=[Exception]),
         flow.ConfigError, lambda r: ("load_model", "custom_objects expected a dict", "[<class 'Exception'>]"),
         "class name -> class"),
    Case("load_model_safe_mode", lambda r: flow.models.load_model(r.tmp / "any", safe_mode=False),
         flow.ConfigError, lambda r: ("load_model", "safe_mode=False", "safe_mode=True"), "holds no code"),
    Case("model_called_on_other_shape", lambda r: r.model(flow.Input((2, 8, 8))), flow.ShapeError,
         lambda r: ("Model 'model'", "(None, 1, 8, 8)", "(None, 2, 8, 8)"), "input 'input"),
    Case("regularizer_unknown", lambda r: flow.layers.Dense(2, kernel_regularizer="l3"), flow.LayerError,
         lambda r: ("kernel_regularizer", "'l1l2'", "'l3'"), "flow.regularizers.*"),
    Case("conv2d_transpose_output_padding", lambda r: flow.layers.Conv2DTranspose(2, 3, output_padding=1),
         flow.LayerError, lambda r: ("Conv2DTranspose", "output_padding=1", "None"), "is not supported"),
    Case("upsampling_interpolation", lambda r: flow.layers.UpSampling2D(interpolation="bilinear"), flow.LayerError,
         lambda r: ("UpSampling2D", "'nearest'", "'bilinear'"), "interpolation"),
    Case("subtract_three_inputs", lambda r: flow.layers.Subtract()([flow.Input((2,))] * 3), flow.LayerError,
         lambda r: ("Subtract", "exactly 2 inputs", "received 3"), "exactly 2"),
    Case("load_mnist_data_format", lambda r: flow.data.load_mnist(100, 100, data_format="NWHC"), flow.InputError,
         lambda r: ("load_mnist", "'NCHW' or 'NHWC'", "'NWHC'"), "data_format"),
    # OneFlow face: get_variable, placement, distribute, watch, model I/O
    Case("get_variable_model_name", job_with(lambda x: flow.get_variable("w", (8, 2), model_name="weight")),
         flow.ConfigError, lambda r: ("flow.get_variable('w')", "model_name='weight'", "expected None"),
         "known by its name", face="job"),
    Case("get_variable_reuse", job_with(lambda x: flow.get_variable("hidden/kernel", (64, 5), reuse=False)),
         flow.GraphError, lambda r: ("flow.get_variable('hidden/kernel')", "reuse=False", "one that exists"),
         "pass reuse=True to share it", face="job"),
    Case("placement_on_a_subset_in_the_mirrored_view", job_with(lambda x: _placed(x, "0:0")), flow.ConfigError,
         lambda r: ("placement('cpu', '0:0')", "the consistent view", "the mirrored view"),
         "keeps a whole replica on every device", views=(M2,), face="job"),
    Case("placement_beyond_the_devices", job_with(lambda x: _placed(x, "0:5")), flow.ConfigError,
         lambda r: ("placement('cpu', '0:5')", "among the 2 in use", "['0:5']"), "use devices in that range",
         views=(C2,), face="job"),
    Case("get_variable_random_seed", job_with(lambda x: flow.get_variable("w", (8, 2), random_seed=1.5)),
         flow.ConfigError, lambda r: ("flow.get_variable('w')", "random_seed expected an int or None", "1.5"),
         "random_seed", face="job"),
    Case("dense_model_distribute", job_with(lambda x: flow.layers.dense(x, 4, model_distribute=flow.distribute.split(2))),
         flow.SBPError, lambda r: ("flow.layers.dense", "split(0), split(1) or broadcast()", "split(2)"),
         "model_distribute", face="job"),
    Case("with_distribute_on_two_axes", split_job, flow.SBPError,
         lambda r: ("with_distribute", "a one-axis mesh", "['data', 'model']"), "with_sbp", views=(C2,)),
    Case("watch_outside_job", lambda r: flow.watch(flow.Input((2,)), print), flow.GraphError,
         lambda r: ("flow.watch", "expected inside a function decorated"), "@flow.global_function", face="job"),
    Case("load_variables_mismatch", load_variables_mismatch, flow.ShapeError,
         lambda r: ("flow.load_variables", "'hidden/kernel'", "(64, 5)", "(3, 3)"), "expected a value of shape",
         face="job"),
]


@pytest.mark.parametrize("case,view,n", [pytest.param(c, v, n, id=f"{c.id}-{v}{n}", marks=c.marks())
                                         for c in CASES for v, n in c.views])
def test_mistake_is_named_and_changes_nothing(case, view, n, tmp_path, monkeypatch):
    expected = undisturbed(case.face, view, n)
    run = Run(case.face, view, n, tmp_path, monkeypatch)
    if not case.first:
        run.epoch()
    with pytest.raises(case.error) as e:
        case.mistake(run)
    message = str(e.value)
    missing = [w for w in case.words(run) + (case.hint,) if w not in message]
    assert not missing and "in user code" not in message, (missing, message)
    if case.fix:
        case.fix(run)
    run.epoch()
    if case.first:
        run.epoch()
    for got, want in zip(run.weights(), expected):
        np.testing.assert_array_equal(got, want)


def test_every_case_checks_how_to_fix_it():
    assert not [c.id for c in CASES if not c.hint]


@pytest.mark.parametrize("error", list(ERRORS))
def test_errors_are_flowlayers_errors_and_the_builtin_that_fits(error):
    assert issubclass(error, flow.FlowLayersError) and issubclass(error, ERRORS[error])
    assert str(error("layer 'x': expected 1, received 2")) == "layer 'x': expected 1, received 2"


def test_a_rejected_layer_takes_no_automatic_name():
    with pytest.raises(flow.LayerError):
        flow.layers.Dense(-1)
    with pytest.raises(flow.DTypeError):
        flow.layers.Dense(3, dtype="float31")
    assert flow.layers.Dense(3).name == "dense"


TF_STARTED_ELSEWHERE = """
import numpy as np
import tensorflow as tf
tf.constant(1.0) + 1                      # the user's own TF code starts TF first, with one CPU device

import flowlayers as flow
import flowlayers.typing as tp
from flowlayers.framework.variable import store

flow.config.set_view("mirrored")
try:
    flow.config.gpu_device_num(2)         # refused here, at once: TF started with one device
except flow.ConfigError as e:
    print("ERROR", e)
cfg = flow.function_config()
cfg.default_logical_view(flow.scope.mirrored_view())

def make():
    flow.clear_session()
    @flow.global_function(type="train", function_config=cfg)
    def train_job(x: tp.Numpy.Placeholder((8, 4)), y: tp.Numpy.Placeholder((8,), dtype=flow.int32)) -> tp.Numpy:
        loss = flow.nn.sparse_softmax_cross_entropy_with_logits(y, flow.layers.dense(x, 3, name="fc"))
        flow.optimizer.SGD(flow.optimizer.PiecewiseConstantScheduler([], [0.1])).minimize(loss)
        return loss
    return train_job

x, y = np.linspace(0, 1, 32, dtype=np.float32).reshape(8, 4), np.arange(8, dtype=np.int32) % 3
job = make()
job(x, y); job(x, y)                      # on the one device there is
disturbed = store.variables["fc/kernel"].numpy()
job = make()
job(x, y); job(x, y)
print("DIFF", np.abs(store.variables["fc/kernel"].numpy() - disturbed).max())
"""


@pytest.mark.tensorflow_backend
@pytest.mark.slow
def test_devices_asked_after_tensorflow_started_elsewhere_are_refused_at_once():
    """The one mistake a running test process cannot make: TF started by other code before any device count.
    The device count is refused where it is set, and job functions then train on the devices there are."""
    env = {k: v for k, v in os.environ.items() if k != "FLOWLAYERS_CPU_DEVICES"}
    out = subprocess.run([sys.executable, "-c", textwrap.dedent(TF_STARTED_ELSEWHERE)], env=env, text=True,
                         capture_output=True, timeout=300, cwd=Path(__file__).parent)
    assert out.returncode == 0, out.stderr[-3000:]
    error = next(line for line in out.stdout.splitlines() if line.startswith("ERROR"))
    for words in ("gpu_device_num(2)", "at most 1 devices", "received 2", "started by code",
                  "before any TensorFlow code runs"):
        assert words in error, error
    assert "DIFF 0.0" in out.stdout, out.stdout


DATASET_AFTER_DEVICES = """
import numpy as np
import tensorflow as tf
import flowlayers as flow

flow.config.set_view("mirrored")
flow.config.gpu_device_num(2)             # sets the devices up now: the dataset below starts TF with them
ds = tf.data.Dataset.from_tensor_slices((np.ones((8, 4), np.float32), np.zeros(8, np.int32))).batch(4)
x = flow.Input((4,))
model = flow.Model(x, flow.layers.Dense(3)(x))
model.compile("sgd", "sparse_categorical_crossentropy")
model.fit(ds, verbose=0)
print("DEVICES", len(tf.config.list_logical_devices("CPU")), model.optimizer.iterations)
"""


@pytest.mark.tensorflow_backend
@pytest.mark.slow
def test_devices_set_before_a_tf_data_pipeline_are_honoured():
    """gpu_device_num, then TF code (a dataset) before the first model: the call was in time, so it is honoured."""
    env = {k: v for k, v in os.environ.items() if k != "FLOWLAYERS_CPU_DEVICES"}
    out = subprocess.run([sys.executable, "-c", textwrap.dedent(DATASET_AFTER_DEVICES)], env=env, text=True,
                         capture_output=True, timeout=300, cwd=Path(__file__).parent)
    assert out.returncode == 0, out.stderr[-3000:]
    assert "DEVICES 8 2" in out.stdout, out.stdout


@pytest.mark.tensorflow_backend
def test_a_kernel_is_not_shadowed_by_accident():
    from flowlayers_tensorflow import register_kernel
    from flowlayers_tensorflow.kernels import KERNELS

    relu = KERNELS["relu"]
    with pytest.raises(flow.ConfigError, match=r"register_kernel\('relu'\).*already has a kernel.*replace=True"):
        register_kernel("relu")(lambda node, x, ctx: x)
    assert KERNELS["relu"] is relu
