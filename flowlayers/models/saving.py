"""Whole-model save: architecture, compile settings, weights and optimizer state in one directory.

    model.save("mnist")                          # flowlayers' checkpoint directory
    model = flow.models.load_model("mnist", custom_objects={"Scale": Scale})
    model.save("mnist.keras")                    # Keras 3's file (keras_files/), which Keras opens too

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

``loading.py`` reads it back.  Loading runs no code from the file: only JSON and ``.npy`` arrays read without pickle, and classes found by name
among flowlayers' own or in ``custom_objects``.  A save checks first that every layer's config makes the layer
again, so what saves loads.
"""
import os

from .. import optimizers as optimizers_mod
from ..errors import ConfigError, LayerError
from ..framework import checkpoint_format as checkpoint, graph
from ..serialization import encode, object_spec
from .keras_files import archive, formats, legacy

FORMAT = "flowlayers-model-1"


# Saving ------------------------------------------------------------------
def save_model(model, filepath, overwrite=True, zipped=None, **kwargs):
    """``model.save``: Keras 3's signature.  The path's extension picks the file (``keras_files/formats.py``):
    ``.keras`` Keras 3's zip, ``.h5``/``.hdf5`` the legacy HDF5 model, any other path flowlayers' checkpoint
    directory (described above), which also holds what Keras' files have no place for."""
    where = f"Model {model.name!r}.save"
    if kwargs:
        raise ConfigError(f"{where}: unexpected keyword argument(s) {sorted(kwargs)}; expected filepath, overwrite "
                          f"and zipped")
    path = os.fspath(filepath)
    kind = formats.kind(path)
    if zipped is not None and zipped != (kind == formats.KERAS):
        expected = "zipped=None or True with a .keras path" if kind == formats.KERAS else \
            "zipped=None or False: a zip is a .keras path, and flowlayers writes no unzipped Keras directory"
        raise ConfigError(f"{where}({path!r}): zipped={zipped!r} does not fit the path; expected {expected}")
    checkpoint.refuse_existing(path, overwrite, where)
    model.require_built("save")
    if kind == formats.KERAS:
        archive.save(model, path, where)
    elif kind in (formats.LEGACY_H5, formats.WEIGHTS_H5):      # Keras 3 too writes a legacy file for any .h5
        legacy.save(model, path, where)
    else:
        description = {"format": FORMAT, **_describe(model), "compile": _compile_config(model)}
        model.trainer.save_checkpoint(path, extra_state={"model": description})


def _describe(model):
    owners = {}
    return {"model": model._model_spec(owners, {}), "owners": owners}


def entry(unit, model, owners, objects, position):
    def refs(blobs):
        return [[position[id(u)], i] for u, i in map(graph.unit_of, blobs)]

    if isinstance(unit, graph.Call):
        return {"call": owner(unit.owner, owners, objects), "inputs": refs(graph.unit_inputs(unit)),
                "single": not isinstance(unit.inputs, (list, tuple)),
                "kwargs": encode(unit.kwargs, f"the call of {unit.owner.name!r}"), **where(unit.outputs[0].node)}
    node = unit
    if node.op.kind == "placeholder":
        return {"input": input_spec(node.outputs[0])}
    if node.layer is not None:
        raise LayerError(f"Model {model.name!r}: op {node.name!r} belongs to layer {node.layer.name!r} but was not "
                         f"made by calling it; expected every layer used through layer(x) to save the model")
    if node.op.kind == "variable":
        raise LayerError(f"Model {model.name!r}: op {node.name!r} reads variable {node.variable.path!r} "
                         f"outside any layer; a saved model rebuilds variables through layers, so expected it made "
                         f"by a Layer's add_weight")
    return {"op": node.op.name, "attrs": encode(node.attrs, f"op {node.name!r}"), "inputs": refs(node.inputs),
            **where(node)}


def where(node):
    """The placement (``flow.scope.placement``) and recomputed segment (``flow.recompute``) a call or op was made
    in, where it has them."""
    where = {}
    if node.placement is not None:
        where["placement"] = list(node.placement)
    if node.recompute is not None:
        where["recompute"] = node.recompute
    return where


def input_spec(blob):
    if blob is None:
        return None
    return {"name": blob.name, "shape": list(blob.shape[1:]), "batch_size": blob.shape[0], "dtype": blob.dtype.name}


def owner(owner, owners, objects):
    """Enter ``owner`` (a layer or a nested model) in the table once; returns its name."""
    held = objects.get(owner.name)
    if held is not None:
        if held is not owner:
            raise LayerError(f"layer {owner.name!r}: two different layers of the model share this name; expected "
                             f"unique layer names to save it (their weights would share paths)")
        return owner.name
    objects[owner.name] = owner
    owners[owner.name] = owner._saved(owners, objects)      # a layer by its config; a nested model whole
    return owner.name


def _compile_config(model):
    if model.optimizer is None:
        return None
    opt = model.optimizer
    if callable(opt.learning_rate) and not isinstance(opt.learning_rate,
                                                      optimizers_mod.schedules.LearningRateSchedule):
        raise ConfigError(f"Model {model.name!r}.save: optimizer {opt.name!r} has a callable learning_rate "
                          f"{opt.learning_rate!r}, which cannot be saved without its code; expected a number or a "
                          f"flow.optimizers.schedules schedule (or save_weights, which saves the optimizer state "
                          f"without its settings)")
    spec = {"optimizer": object_spec(opt, f"optimizer {opt.name!r}"), "jit_compile": model.trainer.jit_compile,
            "micro_batches": model.trainer.micro_batches, "steps_per_execution": model.steps_per_execution}
    if model.trainer.heads is None:
        spec.update(loss=_loss_spec(model.loss), loss_weights=model.trainer.loss_weight,
                    metrics=[object_spec(m, f"metric {m.name!r}") for m in model.compiled_metrics])
    else:
        spec.update(loss={h.name: _loss_spec(h.loss) for h in model.trainer.heads},
                    loss_weights={h.name: h.weight for h in model.trainer.heads},
                    metrics={h.name: [_unprefixed(m, h.name) for m in h.metrics] for h in model.trainer.heads})
    return spec


def _loss_spec(loss):
    return None if loss is None else object_spec(loss, f"loss {loss.name!r}")


def _unprefixed(metric, head):
    """A head's metric as compile took it: compile names it ``<output>_<name>`` again."""
    spec = object_spec(metric, f"metric {metric.name!r}")
    spec["config"]["name"] = metric.name[len(head) + 1:]
    return spec
