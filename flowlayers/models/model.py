"""Model: a layer that is trained with ``fit`` — functional (from ``flow.Input``s to outputs), a ``Sequential``, or a
subclass with its own ``call``.

    x = flow.Input((784,))
    y = flow.layers.Dense(10)(flow.layers.Dense(128, activation="relu")(x))
    model = flow.Model(inputs=x, outputs=y)
    model.compile(optimizer="adam", loss=flow.losses.SparseCategoricalCrossentropy(from_logits=True),
                  metrics=["accuracy"])
    model.fit(x_train, y_train, batch_size=100, epochs=2)

    class MLP(flow.Model):                       # subclassed, as in Keras
        def __init__(self):
            super().__init__()
            self.hidden, self.out = flow.layers.Dense(128, activation="relu"), flow.layers.Dense(10)

        def call(self, x):
            return self.out(self.hidden(x))

A subclassed model is built by tracing ``call`` on symbolic inputs: at its first call on Blobs, at ``build``, or at
the first ``fit``/``evaluate``/``predict`` from the data's shapes; from then on it is a graph like any other.  The
same model runs in every view; the view in force when ``fit`` runs decides where.  What ``compile`` sets and ``fit``
uses lives in ``model.trainer`` (``trainer.py``).
"""
import contextlib
import math
import os

import numpy as np

from .. import engine, export as exporting, metrics as metrics_mod, regularizers
from ..errors import CheckpointError, GraphError, InputError, LayerError, ShapeError, describe_shape
from ..framework import checkpoint_format as checkpoint, step_trace
from ..framework.blob import Blob
from ..framework.graph import Call, apply, layer_scope, record_call, topo_sort, unit_inputs, unit_of, units
from ..inputs import Input
from ..layers.base import Layer, outermost_training
from ..ops.reduce import reduce_mean
from ..parallel import report
from . import custom_fit, saving, summary as summary_mod, training
from .keras_files import archive as keras_archive, formats, legacy as keras_legacy, weights as keras_weights
from .trainer import Trainer


class Model(Layer):
    def __init__(self, inputs=None, outputs=None, name=None, **kwargs):
        super().__init__(name=name or _default_name(type(self)), **kwargs)
        self.trainer = Trainer(self)
        self.stop_training = False
        self.history = None
        self.train_function = None      # Keras callbacks look for it (TensorBoard's graph); no Keras graph here
        self.inputs = self.outputs = None
        if inputs is not None or outputs is not None:
            if _defines_call(type(self)):
                raise GraphError(f"Model {self.name!r} ({type(self).__name__}): expected either inputs and outputs "
                                 f"(a functional model) or a call method (a subclassed model), received both; "
                                 f"drop call, or build the graph in call")
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
        self._layers = []     # as Keras lists them: what was called, a nested model as one (never this model)
        for unit in _keras_order(units(self.outputs)):
            owner = unit.owner if isinstance(unit, Call) else unit.layer
            if owner is not None and owner is not self and all(owner is not known for known in self._layers):
                self._layers.append(owner)
        self.built = True
        # add_loss terms computed from these inputs: part of the graph, replayed with it
        self._loss_terms = loss_terms(self.loss_owners(), feeds)
        if self._loss_terms:
            self._nodes = topo_sort(self.outputs + [t for _, t in self._loss_terms])
        self.trainer.forget_steps()

    @property
    def trainable(self):
        return self._trainable

    @trainable.setter
    def trainable(self, value):
        """``False`` freezes every layer of the model (transfer learning: a base model inside a new one), ``True``
        unfreezes them, as Keras sets a model's layers."""
        self._trainable = bool(value)
        for w in self._weights:
            w.frozen = not self._trainable
        for layer in self.layers:
            layer.trainable = value

    # A model is a layer ---------------------------------------------------
    def __call__(self, inputs, training=None, **kwargs):
        """On Blobs: this model applied to them, its weights shared (nested models, transfer learning);
        ``training=False`` runs its BatchNormalization and Dropout as in inference.  A model not built yet (a
        Sequential without an Input, a subclassed model) is built from their shapes first.  On arrays: its outputs
        for them, as one batch."""
        given = list(inputs.values()) if isinstance(inputs, dict) else \
            list(inputs) if isinstance(inputs, (list, tuple)) else [inputs]
        if not all(isinstance(b, Blob) for b in given):
            return self.predict_on_batch(inputs)
        training = outermost_training(training)
        if _defines_call(type(self)):
            if not self.built:
                self.build([b.shape for b in given] if isinstance(inputs, (list, tuple)) else given[0].shape,
                           [b.dtype for b in given])
            return super().__call__(inputs, training=training, **kwargs)
        if kwargs:
            raise GraphError(f"Model {self.name!r}: unexpected keyword argument(s) {sorted(kwargs)} in a call on "
                             f"Blobs; expected inputs and training")
        if not self.built:
            self.build([b.shape for b in given] if isinstance(inputs, (list, tuple)) else given[0].shape,
                       [b.dtype for b in given])
        return self.call(inputs, training=training)

    def call(self, inputs, training=None):
        """A functional model's graph applied to ``inputs`` (Blobs): each of its ops made again on them."""
        self.require_built("__call__")
        if isinstance(inputs, dict) and all(isinstance(b, Blob) for b in inputs.values()):
            if sorted(inputs) != sorted(self.input_names):
                raise GraphError(f"Model {self.name!r}: expected Blobs for the inputs {self.input_names}, received "
                                 f"them for {sorted(inputs)}")
            inputs = [inputs[n] for n in self.input_names]
        given = list(inputs) if isinstance(inputs, (list, tuple)) else [inputs]
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
        for owner, term in self._loss_terms:        # each call adds its own terms, as Keras' call does
            owner.__dict__.setdefault("_added_losses", []).append(values[id(term.node), term.index])
        results = [values[id(b.node), b.index] for b in self.outputs]
        if self._output_keys:
            results = dict(zip(self._output_keys, results))
        elif self._single_output:
            results = results[0]
        return record_call(self, given, {} if training is None else {"training": bool(training)}, results)

    def build(self, input_shape, dtypes=None):
        """A subclassed model: its ``call`` traced on Inputs of ``input_shape`` (one shape, a list of them, batch
        dim first; ``dtypes``: theirs, default float32), after which it is a graph like a functional model's.  A
        functional model is built already."""
        if self.built or not _defines_call(type(self)):
            return
        several = isinstance(input_shape, list) and input_shape and isinstance(input_shape[0], (list, tuple))
        shapes = list(input_shape) if several else [input_shape]
        kinds = list(dtypes) if dtypes is not None else ["float32"] * len(shapes)
        inputs = [Input(tuple(s[1:]), batch_size=s[0], dtype=d, name=f"{self.name}_input_{i}" if several else None)
                  for i, (s, d) in enumerate(zip(shapes, kinds))]
        given = inputs if several else inputs[0]
        with layer_scope(self):
            outputs = self.call(given, **({"training": None} if self.accepts_training else {}))
        self._init_graph(given, outputs)

    def _build_from_data(self, x):
        """A model not built yet (a Sequential without an Input, a subclassed model) is built from the first data
        it sees: Inputs of its shapes (batch dim unknown) and dtypes (integers as int32, the rest float32)."""
        if self.built or not (_defines_call(type(self)) or self._builds_from_data()):
            return
        arrays = list(x.values()) if isinstance(x, dict) else list(x) if isinstance(x, (list, tuple)) else [x]
        shapes, kinds = [], []
        for a in arrays:
            if hasattr(a, "element_spec"):     # a tf.data.Dataset: its first element's spec
                spec = a.element_spec[0] if isinstance(a.element_spec, tuple) else a.element_spec
                shapes.append((None,) + tuple(spec.shape[1:]))
                kinds.append(spec.dtype.name)
                continue
            a = np.asarray(a)
            shapes.append((None,) + a.shape[1:])
            kinds.append("int32" if a.dtype.kind in "iu" else "float32")
        self.build(shapes if len(shapes) > 1 else shapes[0], kinds)

    def _builds_from_data(self):
        """Whether this kind of model builds itself from data (Sequential does; a functional model is built)."""
        return False

    def require_built(self, what):
        if not self.built:
            raise GraphError(f"Model {self.name!r}.{what}: the model has no inputs yet; expected a model built from "
                             f"flow.Input, a Sequential that has seen data or an input shape, or a subclassed model "
                             f"called once (or fit) so that its call is traced")

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
        """Variables in Keras order: layer by layer, each layer's in creation order; then its own (a subclassed
        model's ``add_weight``) and any read outside layers; then those of layers it keeps as attributes."""
        seen, out = set(), []
        own = list(self._weights) + ([n.variable for n in self._nodes if n.op.kind == "variable"] if self.built else [])
        # then those of layers kept as attributes and not called in its graph (a GAN's generator, as Keras tracks)
        held = [w for layer in vars(self).values() if isinstance(layer, Layer) and layer is not self
                for w in layer.weights]
        for w in [w for layer in self.layers for w in layer.weights] + own + held:
            if id(w) not in seen:
                seen.add(id(w))
                out.append(w)
        return out

    @property
    def losses(self):
        """Keras' ``model.losses``: the scalar Blobs that ``add_loss`` added in the calls of this model's graph
        (its layers', nested models' included; in a custom step, in the calls made on the step's data);
        ``compile``'s loss and ``compute_loss`` add them."""
        trace = step_trace.current()
        if trace is not None:       # in a custom step: the terms of the calls made on its data
            return [t for _, t in loss_terms(self.loss_owners(), trace.feeds)]
        return [t for _, t in self._loss_terms] if self.built else []

    def loss_owners(self):
        """This model and every layer it holds (through nested models, and layers kept as attributes): where
        ``add_loss`` terms are kept."""
        found, todo = [], [self]
        while todo:
            layer = todo.pop(0)
            if any(layer is known for known in found):
                continue
            found.append(layer)
            held = [v for v in vars(layer).values() if isinstance(v, Layer)]
            todo += (layer.layers if isinstance(layer, Model) else []) + held
        return found

    @property
    def output(self):
        """The one output Blob of this model's own graph (Keras' ``model.output``)."""
        self.require_built("output")
        if len(self.outputs) != 1:
            raise GraphError(f"Model {self.name!r}: output expected a model with one output, received "
                             f"{len(self.outputs)} outputs; use model.outputs")
        return self.outputs[0]

    @output.setter
    def output(self, value):
        """What a call on other Blobs returned stays on those Blobs (``Layer.__call__`` records it here for a
        layer); a model's ``output`` is its own graph's."""

    def count_params(self):
        return sum(math.prod(w.shape) for w in self.weights)

    @property
    def _what(self):
        return f"Model {self.name!r}"

    @property
    def output_names(self):
        """Each output's name, Keras' way: its key in a dict of outputs, else the name of the layer that made it
        (else the Blob's)."""
        if not self.built:
            return []
        return list(self._output_keys) if self._output_keys else [
            b.node.layer.name if b.node.layer is not None and b.node.layer is not self else b.name
            for b in self.outputs]

    @property
    def input_names(self):
        """Each input's name: its key in a dict of inputs, else the Input's name (``flow.Input(name=...)``)."""
        return list(self._input_keys) if self._input_keys else [x.name for x in self.inputs]

    # Saving ----------------------------------------------------------------
    def save_weights(self, filepath, overwrite=True, **kwargs):
        """Logical weights, optimizer slots and step: into a ``.weights.h5`` file in Keras 3's layout
        (``keras_files/weights.py``; the optimizer's state where it is Keras' SGD, Adam, AdamW or RMSprop), or into
        directory ``filepath`` for any other path (flowlayers' checkpoint: any optimizer, fit's position).  Both
        load in any view or device count.  ``overwrite=False`` refuses a ``filepath`` that exists (Keras would ask;
        a program cannot be asked)."""
        where = f"Model {self.name!r}.save_weights"
        if kwargs:
            raise InputError(f"{where}: unexpected keyword argument(s) {sorted(kwargs)}; expected filepath and "
                             f"overwrite")
        kind = formats.kind(filepath)
        if kind in (formats.KERAS, formats.LEGACY_H5):
            raise CheckpointError(f"{where}({os.fspath(filepath)!r}): expected a path ending in .weights.h5 (Keras' "
                                  f"weights file) or a path without .keras/.h5 (flowlayers' checkpoint directory), "
                                  f"received a {'.keras' if kind == formats.KERAS else '.h5'} path; model.save writes "
                                  f"whole models to those")
        checkpoint.refuse_existing(filepath, overwrite, where)
        if kind == formats.WEIGHTS_H5:
            keras_weights.save_weights(self, os.fspath(filepath), where)
        else:
            self.trainer.save_checkpoint(filepath)

    def load_weights(self, filepath, **kwargs):
        """Weights and, if saved by the same kind of optimizer, its slots and step, resharded to the view in force.

            model.load_weights("ckpt")                  # flowlayers' checkpoint directory
            model.load_weights("w.weights.h5")          # Keras' weights file; also a .keras or legacy .h5 file

        A checkpoint of another architecture (other shapes, missing weights, or weights this model does not
        have) or a damaged one raises CheckpointError and changes nothing.  Before ``compile`` the weights
        load now and, from a checkpoint directory, the optimizer state when ``compile``'s optimizer first trains,
        read again from the checkpoint then (so keep it in place until that ``fit``); a Keras file's optimizer
        state loads only into a compiled model, as in Keras.
        """
        where = f"Model {self.name!r}.load_weights"
        if kwargs:
            raise InputError(f"{where}: unexpected keyword argument(s) {sorted(kwargs)}; expected filepath")
        kind = formats.kind(filepath)
        if os.path.isdir(filepath) or kind == formats.DIRECTORY:
            self.trainer.load_checkpoint(filepath)
        elif kind == formats.WEIGHTS_H5:
            keras_weights.load_weights(self, os.fspath(filepath), where)
        elif kind == formats.KERAS:
            keras_archive.load_weights(self, os.fspath(filepath), where)
        else:
            keras_legacy.load_weights(self, os.fspath(filepath), where)

    def save(self, filepath, overwrite=True, zipped=None, **kwargs):
        """The whole model - architecture, compile settings, weights, optimizer state: a ``.keras`` path is Keras
        3's zip, a ``.h5`` path the legacy HDF5 model (both open in Keras), any other path flowlayers' checkpoint
        directory; ``flow.models.load_model(filepath)`` gives it back in any view (``saving.py``)."""
        saving.save_model(self, filepath, overwrite, zipped, **kwargs)

    def export(self, filepath, format="tf_saved_model", verbose=None, input_signature=None, **kwargs):
        """The model as an artifact for inference, served without flowlayers (Keras 3's ``export``).

            model.export("served")                           # a SavedModel: tf.saved_model.load(p).serve(x)
            model.export("served_jax", format="jax")         # jax.export: flow.export.load(p)(x)

        ``format``: ``"tf_saved_model"`` (from the jax backend through jax2tf, where TensorFlow is installed) or
        ``"jax"`` (written by the jax backend, where JAX is installed).  ``input_signature``: the endpoint's
        arguments, a list whose specs (``tf.TensorSpec``, ``jax.ShapeDtypeStruct``...) stand for the model's inputs
        in order (a list of specs, or a dict by input name, as one argument); default: the inputs' own shapes, the
        batch free.  ``verbose``: print where it went (None: yes).  ``jax2tf_kwargs`` (jax backend, SavedModel):
        arguments of ``jax2tf.convert``; ``platforms`` (format ``"jax"``): those of ``jax.export.export``.  The
        artifact is written from the logical weights, so whatever view or mesh trained the model, it computes what
        ``predict`` computes, on one device (docs/howto/export.md)."""
        what = f"Model {self.name!r}.export"
        self.require_built("export")
        n_in, n_out = len(self.inputs), len(self.outputs)
        takes = dict(zip(self._input_keys, range(n_in))) if self._input_keys else 0 if n_in == 1 else list(range(n_in))
        returns = dict(zip(self._output_keys, range(n_out))) if self._output_keys else \
            0 if self._single_output else list(range(n_out))
        exporting.export(self.trainer.program("predict"), engine.placement(), filepath, format, verbose,
                         input_signature, kwargs, takes, returns, what)

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
        that many steps in one dispatch where the backend can (``Executable.steps``; the jax backend scans them,
        with a training array's rows gathered on the devices); callbacks' batch hooks then run once per group,
        after its last batch, as in Keras."""
        if kwargs:
            raise InputError(f"Model {self.name!r}.compile: unexpected keyword argument(s) {sorted(kwargs)}")
        self.trainer.compile(optimizer, loss, loss_weights, metrics, jit_compile, micro_batches,
                             steps_per_execution)

    # Keras' names for what compile set
    optimizer = property(lambda self: self.trainer.optimizer)
    loss = property(lambda self: self.trainer.loss)
    compiled_metrics = property(lambda self: CompiledMetrics(self.trainer.metrics))
    steps_per_execution = property(lambda self: self.trainer.steps_per_execution)

    @property
    def metrics_names(self):
        """The labels of what ``evaluate`` returns, in order: ``["loss", <metric names>]`` once compiled."""
        return self.trainer.metrics_names

    def fit(self, x=None, y=None, batch_size=None, epochs=1, verbose="auto", callbacks=None, validation_split=0.0,
            validation_data=None, shuffle=True, class_weight=None, sample_weight=None, initial_epoch=0,
            steps_per_epoch=None, **kwargs):
        _refuse_keywords(self, "fit", kwargs)
        if _overrides(type(self), "train_step"):
            return custom_fit.fit(self, x, y, batch_size, epochs, verbose, callbacks, validation_split,
                                  validation_data, shuffle, initial_epoch, steps_per_epoch, sample_weight, class_weight)
        return training.fit(self, x, y, batch_size, epochs, verbose, callbacks, validation_split, validation_data,
                            shuffle, initial_epoch, steps_per_epoch, sample_weight, class_weight)

    def evaluate(self, x=None, y=None, batch_size=None, verbose="auto", sample_weight=None, steps=None,
                 callbacks=None, return_dict=False, **kwargs):
        _refuse_keywords(self, "evaluate", kwargs)
        if _overrides(type(self), "test_step"):
            return custom_fit.evaluate(self, x, y, sample_weight, batch_size, verbose, callbacks, return_dict,
                                       training.checked_steps(steps, f"Model {self.name!r}.evaluate"))
        return training.evaluate(self, x, y, sample_weight, batch_size, verbose, callbacks, return_dict,
                                 training.checked_steps(steps, f"Model {self.name!r}.evaluate"))

    def predict(self, x, batch_size=None, verbose="auto", steps=None, callbacks=None, **kwargs):
        _refuse_keywords(self, "predict", kwargs)
        if _overrides(type(self), "predict_step"):
            return custom_fit.predict(self, x, batch_size, verbose, callbacks,
                                      training.checked_steps(steps, f"Model {self.name!r}.predict"))
        return training.predict(self, x, batch_size, verbose, callbacks,
                                training.checked_steps(steps, f"Model {self.name!r}.predict"))

    def train_on_batch(self, x, y=None, sample_weight=None, class_weight=None, return_dict=False):
        """One training step on ``x, y`` as one batch; the loss and metrics of that batch (Keras 3's return)."""
        if _overrides(type(self), "train_step"):
            if class_weight is not None:
                raise InputError(f"Model {self.name!r}.train_on_batch: class_weight is not supported with a custom "
                                 f"train_step; expected None")
            return custom_fit.on_batch(self, x, y, sample_weight, True, return_dict)
        return training.on_batch(self, x, y, return_dict, True, sample_weight, class_weight)

    def test_on_batch(self, x, y=None, sample_weight=None, return_dict=False):
        """The loss and metrics of ``x, y`` as one batch, without training."""
        if _overrides(type(self), "test_step"):
            return custom_fit.on_batch(self, x, y, sample_weight, False, return_dict)
        return training.on_batch(self, x, y, return_dict, False, sample_weight)

    def predict_on_batch(self, x):
        """The outputs for ``x`` as one batch."""
        if _overrides(type(self), "predict_step"):
            return custom_fit.predict(self, x, max(len(training.first_array(x)), 1), 0, None, None)
        return training.predict(self, x, max(len(training.first_array(x)), 1), 0, None)

    # Custom steps (Keras 3's contract; custom_steps.py traces them) ---------
    def train_step(self, data):
        """Keras 3's one training step on ``data`` (the element of a batch: ``x``, ``(x, y)`` or ``(x, y,
        sample_weight)``).  Override it in a subclass, written as Keras 3 writes it (``self(x, training=True)``,
        ``self.compute_loss``, ``flow.GradientTape``, ``self.optimizer.apply``, ``self.metrics``): ``fit`` traces it
        once on symbolic data and compiles what it recorded, in every view (``custom_steps.py``).  This default is
        Keras' own step, for an override that calls ``super().train_step(data)``."""
        step_trace.require(f"Model {self.name!r}.train_step")
        x, y, sample_weight = unpack(data)
        with step_trace.GradientTape() as tape:
            y_pred = self(x, training=True)
            loss = self.compute_loss(x=x, y=y, y_pred=y_pred, sample_weight=sample_weight)
        self.trainer.loss_tracker.update_state(loss)
        variables = self.trainable_weights
        self.optimizer.apply(tape.gradient(loss, variables), variables)
        return self.compute_metrics(x, y, y_pred, sample_weight=sample_weight)

    def test_step(self, data):
        """Keras 3's one evaluation step (see ``train_step``); ``evaluate`` traces an override."""
        step_trace.require(f"Model {self.name!r}.test_step")
        x, y, sample_weight = unpack(data)
        y_pred = self(x, training=False)
        loss = self.compute_loss(x=x, y=y, y_pred=y_pred, sample_weight=sample_weight, training=False)
        self.trainer.loss_tracker.update_state(loss)
        return self.compute_metrics(x, y, y_pred, sample_weight=sample_weight)

    def predict_step(self, data):
        """Keras 3's one prediction step (see ``train_step``); ``predict`` traces an override."""
        step_trace.require(f"Model {self.name!r}.predict_step")
        x, _, _ = unpack(data)
        return self(x, training=False)

    def compute_loss(self, x=None, y=None, y_pred=None, sample_weight=None, training=True):
        """Keras 3's ``compute_loss`` in a traced step: ``compile``'s loss of ``y_pred`` against ``y`` (weighted by
        ``sample_weight``), plus the ``add_loss`` terms of the calls made in this step and the weight penalties.
        A Blob of one loss per example, whose mean over the batch is the loss (exact in every view)."""
        what = f"Model {self.name!r}.compute_loss"
        trace = step_trace.require(what)
        total = None
        if self.trainer.loss is not None:
            if not isinstance(y_pred, Blob) or not isinstance(y, Blob):
                raise GraphError(f"{what}: expected y and y_pred Blobs for compile's loss (a model of one output), "
                                 f"received y={type(y).__name__}, y_pred={type(y_pred).__name__}")
            total = _mean_of_entries(self.trainer.loss.per_example(y, y_pred))
            if sample_weight is not None:
                total = total * sample_weight
            if self.trainer.loss_weight != 1.0:
                total = total * self.trainer.loss_weight
        for term in self.losses:        # add_loss terms of the calls made in this step
            total = term if total is None else total + term
        if total is None:
            raise GraphError(f"{what}: no loss to compute; expected compile(loss=...) or add_loss terms in the "
                             f"layers called")
        per_example = regularizers.penalized(total)
        if per_example.ndim == 0:
            return per_example
        loss = reduce_mean(per_example, axis=0)       # Keras' scalar: the per-example values are summed where used
        trace.mean_of(per_example, loss)
        return loss

    def compute_metrics(self, x, y, y_pred, sample_weight=None):
        """Keras 3's: update ``compile``'s metrics with ``y`` and ``y_pred``; the results of ``self.metrics``."""
        step_trace.require(f"Model {self.name!r}.compute_metrics")
        if sample_weight is not None and self.compiled_metrics:
            raise InputError(f"Model {self.name!r}.compute_metrics: sample_weight in a traced step is not supported "
                             f"for compiled metrics; expected None")
        for m in self.compiled_metrics:
            m.update_state(y, y_pred)
        return {m.name: m.result() for m in self.metrics}

    def compiled_loss(self, y, y_pred, sample_weight=None, regularization_losses=None):
        """Keras 2's name, kept by Keras 3's TensorFlow trainer (deprecated there): ``compute_loss(y=y,
        y_pred=y_pred, sample_weight=sample_weight)``, which adds the ``add_loss`` terms that
        ``regularization_losses`` (``self.losses``) held in Keras 2; other terms are refused by name."""
        if regularization_losses is not None and [id(t) for t in regularization_losses] != [
                id(t) for t in self.losses]:
            raise InputError(f"Model {self.name!r}.compiled_loss: regularization_losses expected None or "
                             f"self.losses (compute_loss adds them), received other terms; add them to the loss")
        return self.compute_loss(y=y, y_pred=y_pred, sample_weight=sample_weight)

    @property
    def metrics(self):
        """Keras 3's ``model.metrics``: once compiled the ``loss`` tracker and ``compile``'s metrics, then the
        metrics kept as attributes of the model (reset by fit and evaluate at their start)."""
        found = [self.trainer.loss_tracker] if self.trainer.loss_tracker is not None else []
        found += list(self.compiled_metrics)
        found += [v for v in vars(self).values() if isinstance(v, metrics_mod.Metric)]
        return found

    def reset_metrics(self):
        for m in self.metrics:
            m.reset_state()

    def parallel_plan(self, batch_size=32):
        """What runs where in the view in force: per variable (and optimizer slot) its SBP and the shard each
        device holds, read back from the engine (computed from the layouts where no engine is installed: the
        same numbers); every Boxing with its bytes per step (for ``batch_size`` rows).

        The training step is planned once the model is compiled with a loss, else the predict step.
        """
        self.require_built("parallel_plan")
        placement = engine.placement()
        return report.build(self.trainer.step(self._planned_phase, placement=placement), batch_size,
                            read_back=engine.has_engine(placement.backend))

    @property
    def _planned_phase(self):
        """The step ``summary`` and ``parallel_plan`` show: training once compiled with a loss, else predict."""
        return "train" if self.trainer.compiled else "predict"

    def summary(self, print_fn=print):
        self.require_built("summary")
        placement = engine.placement()
        print_fn(summary_mod.summary(self, placement, self.trainer.step(self._planned_phase, placement=placement)))

    def __repr__(self):
        return f"<{type(self).__name__} name={self.name!r}>"


def _defines_call(cls):
    """Whether a Model class is subclassed with its own ``call`` (not a functional model's graph replay)."""
    return any("call" in vars(c) for c in cls.__mro__[:cls.__mro__.index(Model)])


class CompiledMetrics(list):
    """``compile``'s metrics, with Keras 2's ``update_state(y, y_pred)`` of them all (kept by Keras 3's
    TensorFlow trainer for custom steps)."""

    def update_state(self, y_true, y_pred, sample_weight=None):
        for m in self:
            m.update_state(y_true, y_pred, sample_weight)


def _overrides(cls, step):
    """Whether a Model class overrides ``train_step``/``test_step``/``predict_step`` (then fit, evaluate or
    predict trace it)."""
    return getattr(cls, step) is not getattr(Model, step)


def unpack(data):
    """Keras' ``unpack_x_y_sample_weight``: ``(x, y, sample_weight)`` of a step's element."""
    if isinstance(data, list):
        data = tuple(data)
    if not isinstance(data, tuple):
        return data, None, None
    if len(data) == 1:
        return data[0], None, None
    if len(data) == 2:
        return data[0], data[1], None
    if len(data) == 3:
        return data
    raise InputError(f"a step's data expected x, (x,), (x, y) or (x, y, sample_weight), received a tuple of "
                     f"{len(data)}")


def _mean_of_entries(values):
    """A loss per example: the mean of each example's entries (a per-token loss)."""
    return reduce_mean(values, axis=list(range(1, values.ndim))) if values.ndim > 1 else values


def loss_terms(owners, feeds):
    """``(owner, term)`` for each ``add_loss`` term of ``owners`` computed from the placeholders ``feeds`` (node
    ids) alone: the terms of one graph."""
    out, seen = [], set()
    for owner in owners:
        for term in owner.__dict__.get("_added_losses", ()):
            if id(term) in seen:
                continue
            seen.add(id(term))
            if all(n.op.kind != "placeholder" or id(n) in feeds for n in topo_sort([term])):
                out.append((owner, term))
    return out


def _default_name(cls):
    """Keras' names for models: ``sequential`` for a Sequential, the snake_case class name for a subclass; flowlayers'
    functional models are ``model``."""
    if cls is Model:
        return "model"
    return None       # Layer names it after its class, uniquely (my_model, my_model_1, ...)


def _keras_order(found):
    """Calls and ops (producers first, as found from the outputs) in Keras' order: by depth, the farthest from the
    outputs first, and as found within one depth (Keras' ``nodes_by_depth``), so weights line up with Keras'."""
    depth = {id(u): 0 for u in found}
    for unit in reversed(found):                # consumers before their producers
        for x in unit_inputs(unit):
            producer = unit_of(x)[0]
            depth[id(producer)] = max(depth.get(id(producer), 0), depth[id(unit)] + 1)
    return sorted(found, key=lambda u: -depth[id(u)])


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
