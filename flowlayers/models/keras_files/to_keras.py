"""A flowlayers model as Keras 3's config: the ``config.json`` of a ``.keras`` file, and (``legacy=True``) the
``model_config`` of a legacy ``.h5`` file.

    {"module": "keras.src.models.functional", "class_name": "Functional", "registered_name": "Functional",
     "config": {"name", "trainable", "layers": [entry, ...], "input_layers", "output_layers"}, ...}

An entry is a layer (``configs.layer_entry``) with its ``name`` and ``inbound_nodes``, one per call:
``{"args": [...], "kwargs": {...}}`` where a Blob is ``{"class_name": "__keras_tensor__", "config": {"shape",
"dtype", "keras_history": [layer, call, output]}}``; an ``InputLayer`` per Input; or an op applied outside any
layer (``x + y``), as Keras' operation of that name (``Add``).  A Sequential lists its Input and its layers.
A model Keras has no words for (a subclass, nested models, placements or recomputed segments, other ops outside
layers) is refused by name: flowlayers' checkpoint directory holds it.
"""
import numpy as np

from ...errors import LayerError
from ...framework import graph
from . import configs, layer_table

FUNCTIONAL = {"module": "keras.src.models.functional", "class_name": "Functional", "registered_name": "Functional"}
SEQUENTIAL = {"module": "keras", "class_name": "Sequential", "registered_name": None}
KERAS_OPS = {"add": "Add", "subtract": "Subtract", "multiply": "Multiply", "divide": "TrueDivide"}
LEGACY_OPS = ("Add", "Subtract", "Multiply")       # written as Keras' merging layers in a legacy .h5 file
DIRECTORY = "or save to a path without .keras/.h5 (flowlayers' checkpoint directory holds any model)"


def kind(model, where):
    """``"Functional"`` or ``"Sequential"``: the Keras model class ``model`` is written as."""
    found = layer_table.model_kind(model)
    if found is None:
        raise LayerError(f"{where}: model {model.name!r} is a subclass of Model ({type(model).__name__}); a Keras file "
                         f"holds a functional model or a Sequential, so expected one of those, {DIRECTORY}")
    return found


def model_config(model, where, legacy=False):
    """The whole config Keras deserializes: the model's class and its ``config``."""
    model.require_built("save")
    _refuse_scopes(model, where)
    if kind(model, where) == "Sequential":
        return {**SEQUENTIAL, "config": _sequential(model, where, legacy)}
    return {**FUNCTIONAL, "config": _functional(model, where, legacy)}


def _refuse_scopes(model, where):
    for node in graph.topo_sort(model.outputs):
        if node.placement is not None or node.recompute is not None:
            scope = "flow.scope.placement" if node.placement is not None else "flow.recompute()"
            raise LayerError(f"{where}: op {node.name!r} was made under {scope}, which a Keras file has no place "
                             f"for; expected a model without it, {DIRECTORY}")


def _sequential(model, where, legacy):
    layers = [{k: v for k, v in _input_entry(model.inputs[0], legacy).items() if k not in ("name", "inbound_nodes")}]
    for layer in model.layers:
        _refuse_nested(layer, where)
        layers.append(_strip(configs.layer_entry(layer), legacy))
    return {"name": model.name, "trainable": model.trainable, "dtype": configs.keras_value("dtype", "float32"),
            "layers": layers, "build_input_shape": list(model.inputs[0].shape)}


def _refuse_nested(owner, where):
    if hasattr(owner, "trainer"):       # a Model: what has a trainer
        raise LayerError(f"{where}: model {owner.name!r} is nested in the model saved; a Keras file of nested models "
                         f"is not written yet, so expected layers only, {DIRECTORY}")


def _functional(model, where, legacy):
    writer = _Graph(model, where, legacy)
    for unit in graph.units(model.outputs):
        writer.add(unit)
    inputs = [writer.history[id(x.node)][0] for x in model.inputs]
    inputs = [[name, 0, 0] for name in inputs]
    outputs = [writer.keras_history(b) for b in model.outputs]
    if model._input_keys:
        inputs = dict(zip(model._input_keys, inputs))
    elif len(inputs) == 1:
        inputs = inputs[0]
    if model._output_keys:
        outputs = dict(zip(model._output_keys, outputs))
    elif model._single_output:
        outputs = outputs[0]
    return {"name": model.name, "trainable": model.trainable, "layers": writer.entries, "input_layers": inputs,
            "output_layers": outputs}


class _Graph:
    """The entries of a functional model, written unit by unit (producers first)."""

    def __init__(self, model, where, legacy):
        self.where, self.legacy = where, legacy
        self.entries, self.by_owner, self.history = [], {}, {}     # history: id(unit) -> (entry name, call)
        self.taken = {x.name for x in model.inputs} | {layer.name for layer in model.layers}

    def add(self, unit):
        if isinstance(unit, graph.Call):
            self._call(unit)
            return
        node = unit
        if node.op.kind == "placeholder":
            self.entries.append(_input_entry(node.outputs[0], self.legacy))
            self.history[id(node)] = (node.outputs[0].name, 0)
        elif node.op.kind == "constant":
            return          # a number an op takes: written in that op's args
        elif node.layer is not None or node.op.kind == "variable":
            raise LayerError(f"{self.where}: op {node.name!r} reads a variable or belongs to layer "
                             f"{getattr(node.layer, 'name', None)!r} without a call of it; a saved model is made of "
                             f"layer calls, so expected every layer used through layer(x)")
        else:
            self._op(node)

    def _call(self, unit):
        owner = unit.owner
        _refuse_nested(owner, self.where)
        entry = self.by_owner.get(id(owner))
        if entry is None:
            entry = {**_strip(configs.layer_entry(owner), self.legacy), "name": owner.name, "inbound_nodes": []}
            self.by_owner[id(owner)] = entry
            self.entries.append(entry)
        self.history[id(unit)] = (owner.name, len(entry["inbound_nodes"]))
        entry["inbound_nodes"].append(self._node(unit, entry["class_name"]))

    def _node(self, unit, class_name):
        kwargs = dict(unit.kwargs)
        if class_name == "MultiHeadAttention":          # flowlayers calls it on [query, value, key(, mask)]
            query, value, key, *mask = unit.inputs
            args = [self.ref(query), self.ref(value)]
            if key is not value:
                kwargs["key"] = self.ref(key)
            if mask:
                kwargs["attention_mask"] = self.ref(mask[0])
            for flag in ("use_causal_mask", "return_attention_scores"):
                if not kwargs.get(flag):
                    kwargs.pop(flag, None)
        elif isinstance(unit.inputs, (list, tuple)):
            args = [[self.ref(x) for x in unit.inputs]]
        else:
            args = [self.ref(unit.inputs)]
        return {"args": args, "kwargs": kwargs}

    def _op(self, node):
        keras_op = KERAS_OPS.get(node.op.name)
        constants = [x for x in node.inputs if x.node.op.kind == "constant"]
        if keras_op is None or (self.legacy and (constants or keras_op not in LEGACY_OPS)):
            form = "a legacy .h5 file has no form for it (use a .keras path)" if keras_op else \
                "a Keras file has no form for it here"
            raise LayerError(f"{self.where}: op {node.name!r} ({node.op.name}) is applied outside any layer, and "
                             f"{form}; expected a layer for it, {DIRECTORY}")
        name = self._unique(node.op.name if self.legacy else node.name.replace("/", "_"))
        self.history[id(node)] = (name, 0)
        if self.legacy:         # as a merging layer (Keras 3 reads its own op entries in .h5 files as layers)
            entry = {"class_name": keras_op, "config": {"name": name},
                     "name": name, "inbound_nodes": [{"args": [[self.ref(x) for x in node.inputs]], "kwargs": {}}]}
        else:
            entry = {"module": layer_table.OP_MODULE, "class_name": keras_op, "config": {"name": name},
                     "registered_name": keras_op, "name": name,
                     "inbound_nodes": [{"args": [self.ref(x) for x in node.inputs], "kwargs": {}}]}
        self.entries.append(entry)

    def _unique(self, name):
        found, i = name, 0
        while found in self.taken:
            i += 1
            found = f"{name}_{i}"
        self.taken.add(found)
        return found

    def keras_history(self, blob):
        unit, index = graph.unit_of(blob)
        name, call = self.history[id(unit)]
        return [name, call, index]

    def ref(self, blob):
        """A Blob as Keras writes a tensor argument; a number an op took, as that number."""
        unit, _ = graph.unit_of(blob)
        if not isinstance(unit, graph.Call) and unit.op.kind == "constant":
            value = np.asarray(unit.attrs["value"])
            if value.ndim:
                raise LayerError(f"{self.where}: op input {unit.name!r} is an array constant of shape "
                                 f"{value.shape}; a Keras file takes numbers only there, so expected a number or "
                                 f"a weight of a layer, {DIRECTORY}")
            return value.item()
        return {"class_name": "__keras_tensor__", "config": {
            "shape": list(blob.shape), "dtype": blob.dtype.name, "keras_history": self.keras_history(blob)}}


def _input_entry(blob, legacy):
    config = {"batch_shape": list(blob.shape), "dtype": blob.dtype.name, "sparse": False, "ragged": False,
              "name": blob.name, "optional": False}
    entry = {"module": "keras.layers", "class_name": "InputLayer", "config": config, "registered_name": None,
             "name": blob.name, "inbound_nodes": []}
    return _strip(entry, legacy)


def _strip(entry, legacy):
    """A legacy ``.h5`` config names classes without modules, as Keras 3 writes one."""
    if not legacy:
        return entry
    return {k: v for k, v in entry.items() if k not in ("module", "registered_name")}
