"""Whole-model save: architecture, compile settings, weights and optimizer state in one directory.

    model.save("mnist.keras")
    model = flow.models.load_model("mnist.keras", custom_objects={"Scale": Scale})

The directory is a checkpoint (``framework/checkpoint_format.py``: one ``.npy``
per variable, a manifest with checksums, written atomically) whose manifest
``state`` also holds ``"model"``:

    {"format": "flowlayers-model-1",
     "owners": {name: {"class_name", "module", "config"}             a layer, by its get_config
                       | {"class_name": "Model"|"Sequential", "model": <model>}},   a nested model
     "model": <model>, "compile": null | {"optimizer", "loss", "loss_weights", "metrics", "jit_compile",
                                             "micro_batches", "steps_per_execution"}}

A functional ``<model>`` lists ``entries`` in the order they are rebuilt:
``{"input": {name, shape, batch_size, dtype}}``, ``{"call": owner, "inputs": [[entry, output], ...], "single":
bool, "kwargs": {...}}`` (a layer or model called again) or ``{"op": name, "attrs": {...}, "inputs": [...]}``
(an op applied outside any layer, e.g. ``x * 2``); ``inputs`` and ``outputs`` name entries the same way.  A call
or op made under ``flow.scope.placement`` or ``flow.recompute()`` also holds ``"placement": [device, ...]`` or
``"recompute": segment`` (entries of one segment share its number).  A Sequential is ``{"input", "layers":
[owner, ...]}``.

Loading runs no code from the file: only JSON and ``.npy`` arrays read without pickle, and classes found by name
among flowlayers' own or in ``custom_objects``.  A save checks first that every layer's config makes the layer
again, so what saves loads.
"""
import contextlib
import json
import os

import numpy as np

from .. import dtypes, losses as losses_mod, metrics as metrics_mod, optimizers as optimizers_mod, sbp as sbp_mod
from ..errors import CheckpointError, ConfigError, FlowLayersError, LayerError
from ..framework import checkpoint_format as checkpoint, graph, naming
from ..framework.blob import Blob

FORMAT = "flowlayers-model-1"


# Saving ------------------------------------------------------------------
def save_model(model, filepath, overwrite=True, zipped=None, **kwargs):
    """``model.save``: Keras 3's signature; the model is written as a directory (``zipped=True`` is refused)."""
    where = f"Model {model.name!r}.save"
    if kwargs:
        raise ConfigError(f"{where}: unexpected keyword argument(s) {sorted(kwargs)}; expected filepath, overwrite "
                          f"and zipped")
    path = os.fspath(filepath)
    if path.lower().endswith((".h5", ".hdf5")):
        raise CheckpointError(f"{where}({path!r}): the HDF5 format is not supported; expected a path such as "
                              f"'model.keras' (flowlayers writes a directory there)")
    if zipped:
        raise ConfigError(f"{where}: zipped={zipped!r} is not supported; flowlayers writes the model as a directory, "
                          f"so expected zipped=None or False")
    checkpoint.refuse_existing(path, overwrite, where)
    model._require_built("save")
    description = {"format": FORMAT, **_describe(model), "compile": _compile_config(model)}
    model._save_checkpoint(path, extra_state={"model": description})


def _describe(model):
    owners = {}
    return {"model": _model_spec(model, owners, {}), "owners": owners}


def _model_spec(model, owners, objects):
    from .sequential import Sequential
    from .model import Model

    if type(model) is Sequential:
        return {"class_name": "Sequential", "name": model.name, "input": _input_spec(model._input),
                "layers": [_owner(layer, owners, objects) for layer in model._stack]}
    if type(model) is not Model:
        raise LayerError(f"Model {model.name!r}: saving a subclass of Model ({type(model).__name__}) is not "
                         f"supported; expected a flow.Model built from Inputs or a flow.Sequential (save_weights "
                         f"saves any model's weights)")
    entries, position = [], {}
    for unit in graph.units(model.outputs):
        position[id(unit)] = len(entries)
        entries.append(_entry(unit, model, owners, objects, position))

    def ref(blob):
        unit, index = graph.unit_of(blob)
        return [position[id(unit)], index]

    return {"class_name": "Model", "name": model.name, "entries": entries,
            "inputs": [ref(x)[0] for x in model.inputs], "outputs": [ref(b) for b in model.outputs],
            "input_keys": model._input_keys, "output_keys": model._output_keys,
            "single_output": model._single_output}


def _entry(unit, model, owners, objects, position):
    def refs(blobs):
        return [[position[id(u)], i] for u, i in map(graph.unit_of, blobs)]

    if isinstance(unit, graph.Call):
        return {"call": _owner(unit.owner, owners, objects), "inputs": refs(graph.unit_inputs(unit)),
                "single": not isinstance(unit.inputs, (list, tuple)),
                "kwargs": _encode(unit.kwargs, f"the call of {unit.owner.name!r}"), **_where(unit.outputs[0].node)}
    node = unit
    if node.op.kind == "placeholder":
        return {"input": _input_spec(node.outputs[0])}
    if node.layer is not None:
        raise LayerError(f"Model {model.name!r}: op {node.name!r} belongs to layer {node.layer.name!r} but was not "
                         f"made by calling it; expected every layer used through layer(x) to save the model")
    if node.op.kind == "variable":
        raise LayerError(f"Model {model.name!r}: op {node.name!r} reads variable {node.variable.path!r} "
                         f"outside any layer; a saved model rebuilds variables through layers, so expected it made "
                         f"by a Layer's add_weight")
    return {"op": node.op.name, "attrs": _encode(node.attrs, f"op {node.name!r}"), "inputs": refs(node.inputs),
            **_where(node)}


def _where(node):
    """The placement (``flow.scope.placement``) and recomputed segment (``flow.recompute``) a call or op was made
    in, where it has them."""
    where = {}
    if node.placement is not None:
        where["placement"] = list(node.placement)
    if node.recompute is not None:
        where["recompute"] = node.recompute
    return where


def _input_spec(blob):
    if blob is None:
        return None
    return {"name": blob.name, "shape": list(blob.shape[1:]), "batch_size": blob.shape[0], "dtype": blob.dtype.name}


def _owner(owner, owners, objects):
    """Enter ``owner`` (a layer or a nested model) in the table once; returns its name."""
    from .model import Model

    held = objects.get(owner.name)
    if held is not None:
        if held is not owner:
            raise LayerError(f"layer {owner.name!r}: two different layers of the model share this name; expected "
                             f"unique layer names to save it (their weights would share paths)")
        return owner.name
    objects[owner.name] = owner
    if isinstance(owner, Model):
        owners[owner.name] = {"class_name": type(owner).__name__, "model": _model_spec(owner, owners, objects)}
    else:
        owners[owner.name] = _object_spec(owner, f"layer {owner.name!r}")
        _check_remakes(owner, owners[owner.name]["config"])
    return owner.name


def _object_spec(obj, what):
    cls = type(obj)
    return {"class_name": cls.__name__, "module": cls.__module__, "config": _json(obj.get_config(), what)}


def _json(config, what):
    """``config`` as JSON would give it back, or a LayerError naming what cannot be written."""
    try:
        return json.loads(json.dumps(config))
    except (TypeError, ValueError) as e:
        raise LayerError(f"{what}: get_config() expected to return JSON values (numbers, strings, lists, dicts), "
                         f"received {config!r} ({e})") from None


def _check_remakes(layer, config):
    """Every constructor argument is in the config, and the config makes the layer again (automatic names
    untouched): what is saved must load as it was."""
    import inspect

    named = inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY
    left_out = [p.name for p in inspect.signature(type(layer)).parameters.values()
                if p.kind in named and p.name not in config and p.name not in ("input_shape", "batch_size")]
    if left_out:
        raise LayerError(f"layer {layer.name!r} ({type(layer).__name__}): its constructor takes {left_out} but "
                         f"get_config() does not return {'it' if len(left_out) == 1 else 'them'}, so the saved model "
                         f"would load with defaults instead; expected get_config to return every constructor "
                         f"argument")
    taken = naming.snapshot()
    try:
        type(layer).from_config(dict(config))
    except Exception as e:  # noqa: BLE001 - any failure means the saved model could not be loaded
        raise LayerError(f"layer {layer.name!r} ({type(layer).__name__}): from_config(get_config()) failed, so the "
                         f"saved model could not be loaded: {type(e).__name__}: {e}; expected get_config to return "
                         f"every constructor argument as JSON (activations by name)") from None
    finally:
        naming.restore(taken)


def _compile_config(model):
    if model.optimizer is None:
        return None
    opt = model.optimizer
    if callable(opt.learning_rate):
        raise ConfigError(f"Model {model.name!r}.save: optimizer {opt.name!r} has a callable learning_rate "
                          f"{opt.learning_rate!r}, which cannot be saved without its code; expected a number (or "
                          f"save_weights, which saves the optimizer state without its settings)")
    spec = {"optimizer": _object_spec(opt, f"optimizer {opt.name!r}"), "jit_compile": model._jit_compile,
            "micro_batches": model._micro_batches, "steps_per_execution": model.steps_per_execution}
    if model._heads is None:
        spec.update(loss=_loss_spec(model.loss), loss_weights=model._loss_weight,
                    metrics=[_object_spec(m, f"metric {m.name!r}") for m in model.compiled_metrics])
    else:
        spec.update(loss={h.name: _loss_spec(h.loss) for h in model._heads},
                    loss_weights={h.name: h.weight for h in model._heads},
                    metrics={h.name: [_unprefixed(m, h.name) for m in h.metrics] for h in model._heads})
    return spec


def _loss_spec(loss):
    return None if loss is None else _object_spec(loss, f"loss {loss.name!r}")


def _unprefixed(metric, head):
    """A head's metric as compile took it: compile names it ``<output>_<name>`` again."""
    spec = _object_spec(metric, f"metric {metric.name!r}")
    spec["config"]["name"] = metric.name[len(head) + 1:]
    return spec


# Attributes of ops applied outside layers: JSON with tagged tuples, arrays, dtypes and SBPs
def _encode(value, what):
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, list):
        return [_encode(v, what) for v in value]
    if isinstance(value, tuple):
        return {"tuple": [_encode(v, what) for v in value]}
    if isinstance(value, dict) and all(isinstance(k, str) for k in value):
        return {"dict": {k: _encode(v, what) for k, v in value.items()}}
    if isinstance(value, (np.ndarray, np.generic)) and value.dtype.kind in "biuf":
        return {"array": value.tolist(), "dtype": str(value.dtype)}
    if isinstance(value, dtypes.DType):
        return {"dtype": value.name}
    if sbp_mod.is_sbp(value):
        return {"sbp": repr(value)}
    raise LayerError(f"{what}: expected attributes that can be saved (numbers, strings, tuples, arrays, dtypes, "
                     f"SBPs), received {type(value).__name__} {value!r}")


def _decode(value):
    if isinstance(value, list):
        return [_decode(v) for v in value]
    if not isinstance(value, dict):
        return value
    if "tuple" in value:
        return tuple(_decode(v) for v in value["tuple"])
    if "dict" in value:
        return {k: _decode(v) for k, v in value["dict"].items()}
    if "array" in value:
        return np.asarray(value["array"], dtype=np.dtype(value["dtype"]))
    if "dtype" in value:
        return dtypes.as_dtype(value["dtype"])
    text = value["sbp"]
    return sbp_mod.broadcast if text == "B" else sbp_mod.partial_sum if text == "P" else sbp_mod.split(
        int(text[2:-1]))


# Loading -----------------------------------------------------------------
def load_model(filepath, custom_objects=None, compile=True, safe_mode=True):  # noqa: A002 - Keras' name
    """The model ``model.save`` wrote: rebuilt from its architecture, compiled as it was (``compile=False``:
    not compiled; the optimizer state then waits for the first ``fit`` after a ``compile``, as with
    ``load_weights``), its weights and optimizer state restored.  Custom layers, losses, metrics and optimizers
    come from ``custom_objects`` (class name -> class), as in Keras."""
    path = os.fspath(filepath)
    where = f"flow.models.load_model({path!r})"
    if custom_objects is not None and not (isinstance(custom_objects, dict) and all(
            isinstance(k, str) for k in custom_objects)):
        raise ConfigError(f"{where}: custom_objects expected a dict of class name -> class, received "
                          f"{custom_objects!r}")
    if safe_mode is not True:
        raise ConfigError(f"{where}: safe_mode={safe_mode!r} is not supported; a flowlayers model holds no code, so "
                          f"expected safe_mode=True (the default)")
    if not isinstance(compile, bool):
        raise ConfigError(f"{where}: compile expected True or False, received {compile!r}")
    if not os.path.isdir(path) and not checkpoint.exists(path):
        raise CheckpointError(f"{where}: expected a directory written by model.save, received "
                              f"{'a file' if os.path.exists(path) else 'a path that does not exist'}; a Keras "
                              f".keras zip or .h5 file cannot be read")
    description = checkpoint.Reader(path).state.get("model")
    if not isinstance(description, dict) or description.get("format") != FORMAT:
        raise CheckpointError(f"{where}: expected a whole model saved by model.save (format {FORMAT!r}), received "
                              f"{'a checkpoint of weights only (save_weights / CheckPoint)' if description is None else 'format ' + repr(description.get('format'))}; "
                              f"rebuild the model in code and call load_weights")
    try:
        model = _Builder(description["owners"], custom_objects or {}, where).model(description["model"])
        if compile and description["compile"] is not None:
            _compile(model, description["compile"], custom_objects or {}, where)
    except FlowLayersError:
        raise
    except (KeyError, TypeError, ValueError, IndexError, AttributeError, RecursionError) as e:
        raise CheckpointError(f"{where}: the saved architecture is damaged ({type(e).__name__}: {e}); expected "
                              f"what model.save writes; {checkpoint.DAMAGED_FIX}") from None
    model._load_checkpoint(path)
    return model


class _Builder:
    """Makes the owners (layers, nested models) of a saved model once each, by name, and the models' graphs."""

    def __init__(self, owners, custom_objects, where):
        self.specs, self.custom, self.where, self.made = owners, custom_objects, where, {}

    def owner(self, name):
        if name not in self.made:
            spec = self.specs[name]
            if "model" in spec:
                self.made[name] = self.model(spec["model"])
            else:
                cls = _class(spec, self.custom, _layer_classes(), "layer", name, self.where)
                try:
                    self.made[name] = cls.from_config(dict(spec["config"]))
                except FlowLayersError:
                    raise
                except Exception as e:  # noqa: BLE001 - a custom class's own failure, named
                    raise CheckpointError(f"{self.where}: layer {name!r} ({spec['class_name']}): from_config failed: "
                                          f"{type(e).__name__}: {e}") from None
        return self.made[name]

    @contextlib.contextmanager
    def scopes(self, entry, segments):
        """The placement and recomputed segment an entry was saved with (a segment's entries share a new one)."""
        with contextlib.ExitStack() as stack:
            if "placement" in entry:
                stack.enter_context(graph.placement_scope(tuple(entry["placement"])))
            if "recompute" in entry:
                if entry["recompute"] not in segments:
                    segments[entry["recompute"]] = graph.new_segment()
                stack.enter_context(graph.recompute_scope(segments[entry["recompute"]]))
            yield

    def model(self, spec):
        from ..inputs import Input
        from .model import Model
        from .sequential import Sequential

        def make_input(s):
            return Input(tuple(s["shape"]), batch_size=s["batch_size"], dtype=s["dtype"], name=s["name"])

        if spec["class_name"] == "Sequential":
            first = [make_input(spec["input"])] if spec["input"] else []
            return Sequential(first + [self.owner(n) for n in spec["layers"]], name=spec["name"])
        made, segments = [], {}
        for entry in spec["entries"]:
            if "input" in entry:
                out = make_input(entry["input"])
            else:
                args = [made[k][i] for k, i in entry["inputs"]]
                with self.scopes(entry, segments):
                    if "call" in entry:
                        out = self.owner(entry["call"])(args[0] if entry["single"] else args,
                                                        **_decode(entry["kwargs"]))
                    else:
                        out = graph.apply(_op(entry["op"], self.where), args, _decode(entry["attrs"]))
            made.append(_flat(out))
        inputs = [made[k][0] for k in spec["inputs"]]
        outputs = [made[k][i] for k, i in spec["outputs"]]
        if spec["input_keys"]:
            inputs = dict(zip(spec["input_keys"], inputs))
        if spec["output_keys"]:
            outputs = dict(zip(spec["output_keys"], outputs))
        elif spec["single_output"]:
            outputs = outputs[0]
        return Model(inputs=inputs, outputs=outputs, name=spec["name"])


def _flat(out):
    if isinstance(out, Blob):
        return [out]
    return list(out.values()) if isinstance(out, dict) else list(out)


def _compile(model, spec, custom, where):
    def make(s, table, kind):
        if s is None:
            return None
        cls = _class(s, custom, table, kind, s["config"].get("name"), where)
        return cls(**s["config"])

    metrics_table = _classes(metrics_mod, metrics_mod.Metric)
    losses_table = _classes(losses_mod, losses_mod.Loss)
    loss, metrics = spec["loss"], spec["metrics"]
    if isinstance(loss, dict) and "class_name" not in loss:     # one per output
        loss = {k: make(v, losses_table, "loss") for k, v in loss.items()}
        metrics = {k: [make(m, metrics_table, "metric") for m in v] for k, v in metrics.items()}
    else:
        loss = make(loss, losses_table, "loss")
        metrics = [make(m, metrics_table, "metric") for m in metrics]
    model.compile(optimizer=make(spec["optimizer"], _classes(optimizers_mod, optimizers_mod.Optimizer), "optimizer"),
                  loss=loss, loss_weights=spec["loss_weights"], metrics=metrics, jit_compile=spec["jit_compile"],
                  micro_batches=spec.get("micro_batches", 1), steps_per_execution=spec.get("steps_per_execution", 1))


def _classes(module, base):
    """The classes of ``module`` made from ``base``, not ``base`` itself (abstract: a saved model never holds it)."""
    return {v.__name__: v for v in vars(module).values() if isinstance(v, type) and issubclass(v, base)
            and v is not base}


def _layer_classes():
    from .. import layers

    return _classes(layers, layers.Layer)


def _class(spec, custom, builtin, kind, name, where):
    """The class a spec names: from ``custom_objects`` first (as Keras looks), else flowlayers' own class of that
    name when flowlayers wrote it (a user class that shares a built-in's name is not taken for it)."""
    class_name = spec["class_name"]
    if class_name in custom:
        return custom[class_name]
    if spec.get("module", "flowlayers.").startswith("flowlayers.") and class_name in builtin:
        return builtin[class_name]
    raise CheckpointError(f"{where}: {kind} {name!r} is of class {class_name!r} (module {spec.get('module')!r}), "
                          f"which is not one of flowlayers'; expected it in custom_objects, e.g. "
                          f"custom_objects={{{class_name!r}: {class_name}}}")


def _op(name, where):
    from .. import ops

    table = ops.by_name()
    if name not in table:
        raise CheckpointError(f"{where}: the saved model applies op {name!r}, which this flowlayers does not have; "
                              f"expected one of its ops (was the model saved by a newer version?)")
    return table[name]


