"""Model: a functional graph from ``flow.Input``s to outputs, trained with ``fit``.

    x = flow.Input((784,))
    y = flow.layers.Dense(10)(flow.layers.Dense(128, activation="relu")(x))
    model = flow.Model(inputs=x, outputs=y)
    model.compile(optimizer="adam", loss=flow.losses.SparseCategoricalCrossentropy(from_logits=True),
                  metrics=["accuracy"])
    model.fit(x_train, y_train, batch_size=100, epochs=2)

The same model runs in every view; the view in force when ``compile``
(or ``fit``) runs decides where.
"""
import contextlib

from .. import dtypes, engine, losses as losses_mod, metrics as metrics_mod, optimizers as optimizers_mod
from .. import regularizers, settings
from ..errors import GraphError, InputError, LayerError, ShapeError, describe_shape
from ..framework import checkpoint_format as checkpoint
from ..framework.blob import Blob
from ..framework.compiled import Compiled
from ..framework.variable import assign_all
from ..framework.graph import (Call, apply, layer_scope, placement_scope, record_call, topo_sort, unit_inputs,
                               unit_of, units)
from ..framework.program import build as build_program
from ..ops import source
from ..ops.reduce import reduce_mean
from ..ops.shape import reshape
from ..parallel import report
from . import heads as heads_mod, saving, summary as summary_mod, training


class Model:
    def __init__(self, inputs=None, outputs=None, name=None):
        self.name = name or "model"
        self.optimizer, self.loss, self.compiled_metrics = None, None, []
        self._heads, self._loss_weight = None, 1.0
        self.stop_training = False
        self.history = None
        self.train_function = None      # Keras callbacks look for it (TensorBoard's graph); no Keras graph here
        self._jit_compile = False
        self._micro_batches = 1
        self.steps_per_execution = 1
        self._programs = {}
        if inputs is not None or outputs is not None:
            self._init_graph(inputs, outputs)

    def _init_graph(self, inputs, outputs):
        self._single_output = isinstance(outputs, Blob)
        # inputs / outputs given as dicts: data and results are keyed the same way (Keras' dict models)
        self._input_keys = list(inputs) if isinstance(inputs, dict) else None
        self._output_keys = list(outputs) if isinstance(outputs, dict) else None
        self.inputs = _blob_list(list(inputs.values()) if isinstance(inputs, dict) else inputs, "inputs", self.name)
        self.outputs = _blob_list(list(outputs.values()) if isinstance(outputs, dict) else outputs, "outputs",
                                  self.name)
        for x in self.inputs:
            if x.node.op.kind != "placeholder":
                raise GraphError(f"Model {self.name!r}: inputs expected flow.Input/Placeholder Blobs, received "
                                 f"{x.name!r} produced by op {x.op!r}")
        nodes = topo_sort(self.outputs)
        feeds = {id(x.node) for x in self.inputs}
        for node in nodes:
            if node.op.kind == "placeholder" and id(node) not in feeds:
                raise GraphError(f"Model {self.name!r}: the outputs depend on input {node.name!r}, which is not in "
                                 f"inputs=[{', '.join(x.name for x in self.inputs)}]")
        self._nodes = nodes
        self._layers = []     # as Keras lists them: what was called, a nested model as one
        for unit in _keras_order(units(self.outputs)):
            owner = unit.owner if isinstance(unit, Call) else unit.layer
            if owner is not None and all(owner is not l for l in self._layers):
                self._layers.append(owner)

    @property
    def built(self):
        return hasattr(self, "outputs")

    @property
    def trainable(self):
        return any(layer.trainable for layer in self.layers) if self.built else True

    @trainable.setter
    def trainable(self, value):
        """``False`` freezes every layer of the model (transfer learning: a base model inside a new one)."""
        for layer in self.layers:
            layer.trainable = value

    # A model is a layer ---------------------------------------------------
    def __call__(self, inputs, training=None):
        """On Blobs: this model's graph applied to them, its weights shared (nested models, transfer learning);
        ``training=False`` runs its BatchNormalization and Dropout as in inference.  On arrays: its outputs for
        them, as one batch."""
        self._require_built("__call__")
        if isinstance(inputs, dict) and all(isinstance(b, Blob) for b in inputs.values()):
            if sorted(inputs) != sorted(self.input_names):
                raise GraphError(f"Model {self.name!r}: expected Blobs for the inputs {self.input_names}, received "
                                 f"them for {sorted(inputs)}")
            inputs = [inputs[n] for n in self.input_names]
        given = list(inputs) if isinstance(inputs, (list, tuple)) else [inputs]
        if not all(isinstance(b, Blob) for b in given):
            return self.predict_on_batch(inputs)
        if len(given) != len(self.inputs):
            raise GraphError(f"Model {self.name!r}: expected {len(self.inputs)} input Blob(s) "
                             f"{[x.name for x in self.inputs]}, received {len(given)}")
        for x, g in zip(self.inputs, given):
            if g.shape[1:] != x.shape[1:] or g.dtype != x.dtype:
                raise ShapeError(f"Model {self.name!r}: input {x.name!r} expected a Blob of shape "
                                 f"{describe_shape((None,) + x.shape[1:])} {x.dtype}, received Blob {g.name!r} of "
                                 f"shape {describe_shape(g.shape)} {g.dtype}")
        values = {(id(x.node), x.index): g for x, g in zip(self.inputs, given)}
        for node in self._nodes:
            if node.op.kind == "placeholder":
                continue
            attrs = dict(node.attrs)
            if training is not None and "training" in attrs:
                attrs["training"] = bool(training)
            with layer_scope(node.layer) if node.layer is not None else contextlib.nullcontext():
                out = apply(node.op, [values[id(b.node), b.index] for b in node.inputs], attrs, variable=node.variable)
            out = out if isinstance(out, tuple) else (out,)
            out[0].node.updates, out[0].node.signature = dict(node.updates), node.signature
            for old, new in zip(node.outputs, out):
                values[id(node), old.index] = new
        results = [values[id(b.node), b.index] for b in self.outputs]
        if self._output_keys:
            results = dict(zip(self._output_keys, results))
        elif self._single_output:
            results = results[0]
        return record_call(self, given, {} if training is None else {"training": bool(training)}, results)

    # Layers and weights --------------------------------------------------
    @property
    def layers(self):
        return list(self._layers) if self.built else []

    def get_layer(self, name):
        for layer in self.layers:
            if layer.name == name:
                return layer
        raise InputError(f"Model {self.name!r}: no layer named {name!r}; expected one of "
                         f"{[l.name for l in self.layers]}")

    @property
    def weights(self):
        """Variables in Keras order: layer by layer, each layer's in creation order; then any read outside layers."""
        if not self.built:
            return []
        seen, out = set(), []
        by_layer = [w for layer in self.layers for w in layer.weights]
        for w in by_layer + [n.variable for n in self._nodes if n.op.kind == "variable"]:
            if id(w) not in seen:
                seen.add(id(w))
                out.append(w)
        return out

    @property
    def output(self):
        """The one output Blob of this model's own graph (Keras' ``model.output``)."""
        self._require_built("output")
        if len(self.outputs) != 1:
            raise GraphError(f"Model {self.name!r}: output expected a model with one output, received "
                             f"{len(self.outputs)} outputs; use model.outputs")
        return self.outputs[0]

    @property
    def trainable_weights(self):
        return [w for w in self.weights if w.trainable]

    @property
    def non_trainable_weights(self):
        return [w for w in self.weights if not w.trainable]

    def get_weights(self):
        """Full logical arrays in Keras order, gathered from every device."""
        return [w.numpy() for w in self.weights]

    def set_weights(self, weights):
        assign_all(self.weights, weights, f"Model {self.name!r}")

    def count_params(self):
        import math

        return sum(math.prod(w.shape) for w in self.weights)

    # Checkpoints ---------------------------------------------------------
    def _optimizers(self):
        """owner -> (optimizer, variables it trains), for checkpoints; a deferred restore lands here."""
        if self.optimizer is None:
            return {}
        trainable = self.trainable_weights
        deferred = self.__dict__.get("_deferred_optimizer")
        if deferred is not None:    # kept until it lands: if its files changed, the error says how to retry
            deferred.apply(self.optimizer.name, self.optimizer, trainable)
            del self._deferred_optimizer
        return {self.optimizer.name: (self.optimizer, trainable)}

    def _checkpoint_variables(self):
        """Checkpoint key -> Variable: the weights by path, then the optimizer's slots."""
        variables = {w.path: w for w in self.weights}
        variables.update(checkpoint.slot_variables(self._optimizers()))
        return variables

    def save_weights(self, filepath, overwrite=True, **kwargs):
        """Logical weights, optimizer slots and step into directory ``filepath``; loads in any view or device count.
        ``overwrite=False`` refuses a ``filepath`` that exists (Keras would ask; a program cannot be asked)."""
        if kwargs:
            raise InputError(f"Model {self.name!r}.save_weights: unexpected keyword argument(s) {sorted(kwargs)}; "
                             f"expected filepath and overwrite")
        checkpoint.refuse_existing(filepath, overwrite, f"Model {self.name!r}.save_weights")
        self._save_checkpoint(filepath)

    def save(self, filepath, overwrite=True, zipped=None, **kwargs):
        """The whole model - architecture, compile settings, weights, optimizer state - into directory
        ``filepath``; ``flow.models.load_model(filepath)`` gives it back in any view (``saving.py``)."""
        saving.save_model(self, filepath, overwrite, zipped, **kwargs)

    def _saved(self, owners, objects):
        """This model nested in a saved one (``saving.owner``): its kind and its architecture."""
        return {"class_name": type(self).__name__, "model": self._model_spec(owners, objects)}

    def _model_spec(self, owners, objects):
        """The architecture ``model.save`` writes: each layer call, op and input in the order they are rebuilt."""
        if type(self) is not Model:
            raise LayerError(f"Model {self.name!r}: saving a subclass of Model ({type(self).__name__}) is not "
                             f"supported; expected a flow.Model built from Inputs or a flow.Sequential (save_weights "
                             f"saves any model's weights)")
        entries, position = [], {}
        for unit in units(self.outputs):
            position[id(unit)] = len(entries)
            entries.append(saving.entry(unit, self, owners, objects, position))

        def ref(blob):
            unit, index = unit_of(blob)
            return [position[id(unit)], index]

        return {"class_name": "Model", "name": self.name, "entries": entries,
                "inputs": [ref(x)[0] for x in self.inputs], "outputs": [ref(b) for b in self.outputs],
                "input_keys": self._input_keys, "output_keys": self._output_keys,
                "single_output": self._single_output}

    def _save_checkpoint(self, filepath, position=None, extra_state=None):
        self._require_built("save_weights")
        variables = self._checkpoint_variables()
        state = checkpoint.state(self._optimizers(), settings.seed(), position)
        checkpoint.save(filepath, variables, {**state, **(extra_state or {})})

    def load_weights(self, filepath, **kwargs):
        """Weights and, if saved by the same kind of optimizer, its slots and step, resharded to the view in force.

            model.load_weights("ckpt")

        A checkpoint of another architecture (other shapes, missing weights, or weights this model does not
        have) or a damaged one raises CheckpointError and changes nothing.  Before ``compile`` the weights
        load now and the optimizer state when ``compile``'s optimizer first trains, read again from the
        checkpoint then (so keep it in place until that ``fit``).
        """
        self._load_checkpoint(filepath)

    def _load_checkpoint(self, filepath):
        """Restore weights and optimizer state; returns the checkpoint's state (its ``position`` for resuming)."""
        self._require_built("load_weights")
        weights = {w.path: w for w in self.weights}
        if self.optimizer is None:
            reader, self._deferred_optimizer = checkpoint.restore_before_compile(filepath, weights,
                                                                                 self.trainable_weights)
            return reader.state
        return checkpoint.restore(filepath, weights, self._optimizers()).state

    # Compile and run -----------------------------------------------------
    def compile(self, optimizer="rmsprop", loss=None, loss_weights=None, metrics=None, jit_compile=False,
                micro_batches=1, steps_per_execution=1, **kwargs):
        """Keras' compile.  A model with several outputs takes a loss, loss weight and metrics per output
        (``heads.py``); with one output, ``loss_weights`` scales its loss.

        ``micro_batches`` (flowlayers'; OneFlow's ``set_gradient_accumulation_steps``): each training batch runs
        as that many micro-batches in one step, their gradients summed, one update: what one step on the whole
        batch gives, with the activations of a micro-batch at a time where memory is short, and, when layers are
        placed on different devices (``flow.scope.placement``), a pipeline: those stages work on different
        micro-batches at once.  (``gradient_accumulation_steps`` on an optimizer is Keras' form: one update per
        that many steps, each fed a micro-batch.)

        ``steps_per_execution`` (Keras'): the batches ``fit`` and ``evaluate`` hand the engine at once, run as
        that many steps in one dispatch where the backend can (``contract.run_steps``; the jax backend scans them,
        with a training array's rows gathered on the devices); callbacks' batch hooks then run once per group,
        after its last batch, as in Keras."""
        if kwargs:
            raise InputError(f"Model {self.name!r}.compile: unexpected keyword argument(s) {sorted(kwargs)}")
        if isinstance(micro_batches, bool) or not isinstance(micro_batches, int) or micro_batches < 1:
            raise InputError(f"Model {self.name!r}.compile: micro_batches expected a positive int, received "
                             f"{micro_batches!r}")
        if isinstance(steps_per_execution, bool) or not isinstance(steps_per_execution, int) or \
                steps_per_execution < 1:
            raise InputError(f"Model {self.name!r}.compile: steps_per_execution expected a positive int, received "
                             f"{steps_per_execution!r}")
        optimizer = optimizers_mod.get(optimizer)
        if self.built and len(self.outputs) > 1 and loss is not None:
            self._heads = heads_mod.make_heads(self, loss, loss_weights, metrics)
            self.loss, self.compiled_metrics = [h.loss for h in self._heads], [m for h in self._heads for m in h.metrics]
        else:
            self._heads = None
            if isinstance(loss, (list, tuple, dict)):       # one output: a list or dict of one, as Keras takes it
                loss = _only(loss, "loss", self)
            weight = _only(loss_weights, "loss_weights", self) if isinstance(loss_weights, (list, tuple, dict)) \
                else loss_weights
            if weight is not None and (isinstance(weight, bool) or not isinstance(weight, (int, float))):
                raise InputError(f"Model {self.name!r}.compile: loss_weights expected a number, received {weight!r}")
            self._loss_weight = 1.0 if weight is None else float(weight)
            self.loss = losses_mod.get(loss) if loss is not None else None
            self.compiled_metrics = [metrics_mod.get(m, self.loss) for m in (metrics or [])]
        self.optimizer = optimizer
        self._jit_compile = bool(jit_compile)
        self._micro_batches = micro_batches
        self.steps_per_execution = steps_per_execution
        self._programs = {}

    @property
    def output_names(self):
        """Each output's name, Keras' way: its key in a dict of outputs, else the name of the layer that made it
        (else the Blob's)."""
        if not self.built:
            return []
        return list(self._output_keys) if self._output_keys else [
            b.node.layer.name if b.node.layer is not None else b.name for b in self.outputs]

    @property
    def input_names(self):
        """Each input's name: its key in a dict of inputs, else the Input's name (``flow.Input(name=...)``)."""
        return list(self._input_keys) if self._input_keys else [x.name for x in self.inputs]

    def _build_from_data(self, x):
        """A functional model is built already; Sequential builds here from the first data it sees."""

    def _require_built(self, what):
        if not self.built:
            raise GraphError(f"Model {self.name!r}.{what}: the model has no inputs yet; expected a model built from "
                             f"flow.Input (or a Sequential that has seen data or an input shape)")

    def _executable(self, phase, weighted=False, placement=None):
        """The compiled step for ``phase`` on ``placement`` (default: the settings in force), built once per
        placement, per set of trainable weights - freezing a layer takes effect at the next fit, as a compile does
        in Keras - and with or without sample weights."""
        placement = placement or engine.placement()
        key = (phase, placement, tuple(w.trainable for w in self.weights) if phase == "train" else (), weighted)
        if key not in self._programs:
            self._programs[key] = Compiled(self._program(phase, weighted), placement)
        return self._programs[key]

    def _program(self, phase, weighted=False):
        if phase == "predict":
            return build_program(self.inputs, self.outputs, ["numpy"] * len(self.outputs), "predict",
                           jit_compile=self._jit_compile, name=f"{self.name}.predict")
        if self.loss is None:
            raise GraphError(f"Model {self.name!r}: {'fit' if phase == 'train' else 'evaluate'} needs a loss; "
                             f"call model.compile(optimizer=..., loss=...) first")
        if self._heads is None and len(self.outputs) != 1:
            raise GraphError(f"Model {self.name!r}: fit/evaluate of a model with {len(self.outputs)} outputs expected "
                             f"it compiled with a loss per output (compile(loss=[...]) or a dict by output name)")
        # outputs made under one flow.scope.placement: the loss and metrics are computed there too
        placed = {b.node.placement for b in self.outputs}
        with placement_scope(placed.pop()) if len(placed) == 1 and None not in placed else contextlib.nullcontext():
            return self._train_program(phase, weighted)

    def _train_program(self, phase, weighted):
        weight = source.placeholder((None,), dtypes.float32, f"{self.name}/sample_weight") if weighted else None

        def weighed(per_example):   # Keras: weighted per-sample losses summed over the batch size; metrics stay
            return per_example if weight is None else per_example * reshape(weight, (None,) + (1,) * (
                per_example.ndim - 1))

        if self._heads is None:
            label = self._label_placeholder()
            labels, per_example = [label], weighed(_per_example(self.loss(label, self.outputs[0])))
            if self._loss_weight != 1.0:
                per_example = per_example * self._loss_weight
            head_losses = []
            metric_blobs = [_per_example(m.values(label, self.outputs[0])) for m in self.compiled_metrics]
        else:
            labels, head_losses, metric_blobs, per_example = [], [], [], None
            for h in self._heads:
                if h.loss is None:          # an output without a loss takes no labels
                    continue
                out, label = self.outputs[h.index], self._label_placeholder(h)
                labels.append(label)
                head_losses.append(weighed(_per_example(h.loss(label, out))))
                share = head_losses[-1] * h.weight if h.weight != 1.0 else head_losses[-1]
                per_example = share if per_example is None else per_example + share
                metric_blobs += [_per_example(m.values(label, out)) for m in h.metrics]
        per_example = regularizers.penalized(per_example)     # Keras: the reported loss includes the penalties
        outputs = [per_example] + head_losses + metric_blobs
        return build_program(self.inputs + labels + ([weight] if weighted else []), outputs, ["sum"] * len(outputs),
                       phase, loss=per_example if phase == "train" else None,
                       optimizer=self.optimizer if phase == "train" else None, jit_compile=self._jit_compile,
                       name=f"{self.name}.{phase}", micro_batches=self._micro_batches if phase == "train" else 1)

    def _label_placeholder(self, head=None):
        """The labels' placeholder of the only output, or of ``head``'s output (one with a loss)."""
        if head is None:
            shape, dtype = self.loss.label_spec(self.outputs[0])
            return source.placeholder(shape, dtype, f"{self.name}/labels")
        shape, dtype = head.loss.label_spec(self.outputs[head.index])
        return source.placeholder(shape, dtype, f"{self.name}/{head.name}/labels")

    def fit(self, x=None, y=None, batch_size=None, epochs=1, verbose="auto", callbacks=None, validation_split=0.0,
            validation_data=None, shuffle=True, class_weight=None, sample_weight=None, initial_epoch=0,
            steps_per_epoch=None, **kwargs):
        _refuse_keywords(self, "fit", kwargs)
        return training.fit(self, x, y, batch_size, epochs, verbose, callbacks, validation_split, validation_data,
                            shuffle, initial_epoch, steps_per_epoch, sample_weight, class_weight)

    def evaluate(self, x=None, y=None, batch_size=None, verbose="auto", sample_weight=None, steps=None,
                 callbacks=None, return_dict=False, **kwargs):
        _refuse_keywords(self, "evaluate", kwargs)
        return training.evaluate(self, x, y, sample_weight, batch_size, verbose, callbacks, return_dict,
                                 training.checked_steps(steps, f"Model {self.name!r}.evaluate"))

    def predict(self, x, batch_size=None, verbose="auto", steps=None, callbacks=None, **kwargs):
        _refuse_keywords(self, "predict", kwargs)
        return training.predict(self, x, batch_size, verbose, callbacks,
                                training.checked_steps(steps, f"Model {self.name!r}.predict"))

    def train_on_batch(self, x, y=None, sample_weight=None, class_weight=None, return_dict=False):
        """One training step on ``x, y`` as one batch; the loss and metrics of that batch (Keras 3's return)."""
        return training.on_batch(self, x, y, return_dict, True, sample_weight, class_weight)

    def test_on_batch(self, x, y=None, sample_weight=None, return_dict=False):
        """The loss and metrics of ``x, y`` as one batch, without training."""
        return training.on_batch(self, x, y, return_dict, False, sample_weight)

    def predict_on_batch(self, x):
        """The outputs for ``x`` as one batch."""
        return training.predict(self, x, max(len(training.first_array(x)), 1), 0, None)

    @property
    def metrics_names(self):
        """The labels of what ``evaluate`` returns, in order: ``["loss", <metric names>]`` once compiled."""
        if self.loss is None:
            return []
        losses = [f"{h.name}_loss" for h in self._heads if h.loss is not None] if self._heads else []
        return ["loss"] + losses + [m.name for m in self.compiled_metrics]

    def parallel_plan(self, batch_size=32):
        """What runs where in the view in force: per variable (and optimizer slot) its SBP and the shard each
        device holds, read back from the engine (computed from the layouts where no engine is installed: the
        same numbers); every Boxing with its bytes per step (for ``batch_size`` rows).

        The training step is planned once the model is compiled with a loss, else the predict step.
        """
        self._require_built("parallel_plan")
        placement = engine.placement()
        return report.build(self._executable(self._planned_phase, placement=placement), batch_size,
                            read_back=engine.has_engine(placement.backend))

    @property
    def _planned_phase(self):
        """The step ``summary`` and ``parallel_plan`` show: training once compiled with a loss, else predict."""
        return "train" if self.loss is not None and self.optimizer is not None else "predict"

    def summary(self, print_fn=print):
        self._require_built("summary")
        placement = engine.placement()
        print_fn(summary_mod.summary(self, placement, self._executable(self._planned_phase, placement=placement)))

    def __repr__(self):
        return f"<{type(self).__name__} name={self.name!r}>"


def _keras_order(found):
    """Calls and ops (producers first, as found from the outputs) in Keras' order: by depth, the farthest from the
    outputs first, and as found within one depth (Keras' ``nodes_by_depth``), so weights line up with Keras'."""
    depth = {id(u): 0 for u in found}
    for unit in reversed(found):                # consumers before their producers
        for x in unit_inputs(unit):
            producer = unit_of(x)[0]
            depth[id(producer)] = max(depth.get(id(producer), 0), depth[id(unit)] + 1)
    return sorted(found, key=lambda u: -depth[id(u)])


def _per_example(values):
    """Each example's mean over its other axes: a per-token loss or metric averages over every token, as Keras
    reduces it (the host then averages the examples)."""
    return reduce_mean(values, axis=list(range(1, values.ndim))) if values.ndim > 1 else values


def _only(value, what, model):
    """The one entry of a list or dict given for a model with one output."""
    items = list(value.values()) if isinstance(value, dict) else list(value)
    if len(items) != 1:
        raise InputError(f"Model {model.name!r}.compile: {what} expected one entry for the model's one output, "
                         f"received {len(items)}: {value!r}")
    if isinstance(value, dict) and model.built and list(value) != model.output_names:
        raise InputError(f"Model {model.name!r}.compile: {what} names output {list(value)}, expected "
                         f"{model.output_names}")
    return items[0]


# Keras arguments flowlayers does not implement yet: refused when given, never ignored
_NOT_YET = {"fit": ("validation_steps", "validation_batch_size", "validation_freq"), "evaluate": (),
            "predict": ()}


def _refuse_keywords(model, method, kwargs):
    """Keyword arguments ``method`` does not take: a Keras argument not implemented yet (given a value other than
    its default, None) is named as such; any other name is unexpected."""
    given = {k: v for k, v in kwargs.items() if not (k in _NOT_YET[method] and v is None)}
    if not given:
        return
    where = f"Model {model.name!r}.{method}"
    later = sorted(k for k in given if k in _NOT_YET[method])
    if later:
        raise InputError(f"{where}: {later[0]}={given[later[0]]!r} is not supported yet; expected None (leave it "
                         f"out)")
    raise InputError(f"{where}: unexpected keyword argument(s) {sorted(given)}; check the spelling against "
                     f"Keras' {method} arguments")


def _blob_list(value, what, name):
    items = list(value) if isinstance(value, (list, tuple)) else [value]
    if not items or not all(isinstance(b, Blob) for b in items):
        raise GraphError(f"Model {name!r}: {what} expected a Blob or a list of Blobs, received {value!r}")
    return items
