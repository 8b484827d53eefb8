"""Whole-model load: the model ``model.save`` wrote (``saving.py`` describes the directory; a ``.keras`` or ``.h5``
file, Keras' or flowlayers', is read by ``keras_files/reading.py``), rebuilt from its architecture, compiled as it
was, its weights and optimizer state restored.

Loading runs no code from the file: only JSON and ``.npy`` arrays read without pickle, and classes found by name
among flowlayers' own or in ``custom_objects``.
"""
import contextlib
import os

from .. import layers, losses as losses_mod, metrics as metrics_mod, ops, optimizers as optimizers_mod, registry
from ..errors import CheckpointError, ConfigError, FlowLayersError
from ..framework import checkpoint_format as checkpoint, graph
from ..framework.blob import Blob
from ..inputs import Input
from ..serialization import decode
from .model import Model
from .keras_files import formats, reading
from .saving import FORMAT
from .sequential import Sequential


def load_model(filepath, custom_objects=None, compile=True, safe_mode=True):  # noqa: A002 - Keras' name
    """The model ``model.save`` wrote, or Keras wrote (a ``.keras`` or ``.h5`` file: ``keras_files/``; a directory:
    flowlayers' checkpoint): rebuilt from its architecture, compiled as it was (``compile=False``:
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
    custom_objects = registry.all_custom_objects(custom_objects)     # registered, in scope, given
    kind = formats.kind(path)
    if os.path.isfile(path) and kind == formats.KERAS:
        return reading.load_keras(path, custom_objects, compile, where)
    if os.path.isfile(path) and kind in (formats.LEGACY_H5, formats.WEIGHTS_H5):
        return reading.load_legacy(path, custom_objects, compile, where)
    if not os.path.isdir(path) and not checkpoint.exists(path):
        raise CheckpointError(f"{where}: expected a .keras or .h5 file, or a directory written by model.save, "
                              f"received {'a file of another extension' if os.path.exists(path) else 'a path that does not exist'}")
    description = checkpoint.Reader(path).state.get("model")
    if not isinstance(description, dict) or description.get("format") != FORMAT:
        raise CheckpointError(f"{where}: expected a whole model saved by model.save (format {FORMAT!r}), received "
                              f"{'a checkpoint of weights only (save_weights / CheckPoint)' if description is None else 'format ' + repr(description.get('format'))}; "
                              f"rebuild the model in code and call load_weights")
    try:
        model = _Builder(description["owners"], custom_objects, where).model(description["model"])
        if compile and description["compile"] is not None:
            _compile(model, description["compile"], custom_objects, where)
    except FlowLayersError:
        raise
    except (KeyError, TypeError, ValueError, IndexError, AttributeError, RecursionError) as e:
        raise CheckpointError(f"{where}: the saved architecture is damaged ({type(e).__name__}: {e}); expected "
                              f"what model.save writes; {checkpoint.DAMAGED_FIX}") from None
    model.trainer.load_checkpoint(path)
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
                                                        **decode(entry["kwargs"]))
                    else:
                        out = graph.apply(_op(entry["op"], self.where), args, decode(entry["attrs"]))
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
        return cls.from_config(s["config"], custom) if kind == "optimizer" else cls(**s["config"])

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
    return _classes(layers, layers.Layer)


def _class(spec, custom, builtin, kind, name, where):
    """The class a spec names: from ``custom_objects`` first, by its registered name then its class name (as Keras
    looks), else flowlayers' own class of that
    name when flowlayers wrote it (a user class that shares a built-in's name is not taken for it)."""
    class_name = spec["class_name"]
    for key in (spec.get("registered_name"), class_name):
        if key in custom:
            return custom[key]
    if spec.get("module", "flowlayers.").startswith("flowlayers.") and class_name in builtin:
        return builtin[class_name]
    raise CheckpointError(f"{where}: {kind} {name!r} is of class {class_name!r} (module {spec.get('module')!r}), "
                          f"which is not one of flowlayers'; expected it in custom_objects, e.g. "
                          f"custom_objects={{{class_name!r}: {class_name}}}")


def _op(name, where):
    table = ops.by_name()
    if name not in table:
        raise CheckpointError(f"{where}: the saved model applies op {name!r}, which this flowlayers does not have; "
                              f"expected one of its ops (was the model saved by a newer version?)")
    return table[name]
