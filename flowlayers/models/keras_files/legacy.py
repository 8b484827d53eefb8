"""The legacy HDF5 full-model file (``model.save("m.h5")`` in Keras 2 / tf.keras, still written by Keras 3):

    attrs  model_config      JSON {"class_name", "config"} (``to_keras.py``, ``legacy=True``)
           training_config   JSON {"loss", "metrics", "loss_weights", ..., "optimizer_config"}
           keras_version, backend
    model_weights/           attrs layer_names (every layer, in order), keras_version, backend
        <layer>/             attr weight_names; a dataset at each name (``dense/kernel``, Keras 2: ``...:0``)
    optimizer_weights/       attr weight_names; iterations, learning_rate, then slots in Keras 3's order

Weights load as Keras loads them: the file's layers that have weights, in order, into the model's layers that
have weights; every array is checked before any is assigned.  A file with only ``layer_names`` at its root (Keras
2's ``save_weights("w.h5")``) loads through ``load_weights``.
"""
import json
import warnings

import numpy as np

from ... import engine, env
from ...errors import CheckpointError
from . import archive, atomic, hdf5, to_keras, training_config, weights

SLOT_NAMES = {"m": "momentum", "v": "velocity"}       # Keras 3's names for Adam's slots


def save(model, filepath, where):
    hdf5.require(where)
    config = to_keras.model_config(model, where, legacy=True)
    compile_config, unsaved = training_config.compile_config(model)
    layers = [(layer.name, [(w.path, w.numpy()) for w in weights.keras_order(layer)]) for layer in model.layers]
    opt, slots = weights.optimizer_slots(model) if compile_config is not None else (None, None)
    optimizer = None
    if slots is not None:
        optimizer = [(f"{opt.name}/iteration", np.asarray(opt.iterations, np.int64))]
        if weights.rate_is_variable(opt):
            optimizer.append((f"{opt.name}/learning_rate", np.asarray(opt.learning_rate, np.float32)))
        optimizer += [(f"{opt.name}/{_slot_name(s, opt)}", s.numpy()) for s in slots]
    if env.process_index() == 0:
        inputs = [x.name for x in model.inputs] if to_keras.kind(model, where) == "Functional" else []
        with atomic.replacing(filepath, where) as tmp, hdf5.h5py.File(tmp, "w") as f:
            f.attrs["backend"] = "flowlayers"
            f.attrs["keras_version"] = archive.KERAS_VERSION
            f.attrs["model_config"] = json.dumps(config)
            if compile_config is not None:
                f.attrs["training_config"] = json.dumps(_training(compile_config))
            group = f.create_group("model_weights")
            group.attrs["layer_names"] = [n.encode() for n in inputs + [name for name, _ in layers]]
            group.attrs["backend"], group.attrs["keras_version"] = "flowlayers", archive.KERAS_VERSION
            for name, held in sorted([(n, []) for n in inputs] + layers):
                _write_named(group.create_group(name), held)
            _write_named(group.create_group("top_level_model_weights"), [])
            if optimizer is not None:
                _write_named(f.create_group("optimizer_weights"), optimizer)
    engine.barrier(f"{where} {filepath}")
    archive.warn_unsaved(model, compile_config, unsaved, where)


def _slot_name(slot, opt):
    """``adam/dense_kernel_momentum``-like names (Keras reads these by position; they say what each holds)."""
    rest = slot.path[len(opt.name) + 1:]
    var_path, _, name = rest.rpartition("/")
    return f"{var_path.replace('/', '_')}_{SLOT_NAMES.get(name, name)}"


def _training(compile_config):
    """Keras' legacy training_config: the compile settings with the optimizer as ``optimizer_config``."""
    out = {k: v for k, v in compile_config.items() if k != "optimizer"}
    out["optimizer_config"] = {k: compile_config["optimizer"][k] for k in ("class_name", "config")}
    return out


def _write_named(group, named):
    """Datasets at the names of ``named``, listed in ``weight_names`` as Keras lists them (a list of UTF-8 bytes,
    which h5py stores as variable-length strings; an empty list where there are none)."""
    group.attrs["weight_names"] = [n.encode() for n, _ in named]
    for name, value in named:
        hdf5.write_array(group, name, value)


# Reading -------------------------------------------------------------------
def load_weights(model, filepath, where):
    model.require_built("load_weights")
    with hdf5.reading(filepath, where) as f:
        read(f, model, where)


def read(f, model, where):
    """Check every array for ``model`` (and its optimizer's, where the counts agree), then assign them all."""
    group = hdf5.group(f, "model_weights", where) if hdf5.has(f, "model_weights", where) else f
    saved = [(n, hdf5.list_attribute(hdf5.group(group, n, where), "weight_names"))
             for n in hdf5.list_attribute(group, "layer_names")]
    saved = [(n, names) for n, names in saved if names]
    mine = [layer for layer in model.layers if weights.keras_order(layer)]
    if len(saved) != len(mine):
        raise CheckpointError(f"{where}: the file holds weights of {len(saved)} layer(s) {[n for n, _ in saved][:5]}, "
                              f"the model has {len(mine)} with weights {[l.name for l in mine][:5]}; load it into "
                              f"a model built like the one that saved it")
    plan = []
    for layer, (name, names) in zip(mine, saved):
        held = weights.keras_order(layer)
        if len(names) != len(held):
            raise CheckpointError(f"{where}: layer {layer.name!r} expected {len(held)} weight(s), received "
                                  f"{len(names)} in the file's layer {name!r}")
        layer_group = hdf5.group(group, name, where)
        plan += [(w, weights.checked_value(w, hdf5.array(layer_group, n, where), f"{name}/{n}", where))
                 for w, n in zip(held, names)]
    state = _optimizer_plan(f, model, where)
    for w, value in plan:
        w.assign(value)
    if state is not None:
        opt, iterations, planned = state
        for w, value in planned:
            w.assign(value)
        opt.iterations = iterations


def _optimizer_plan(f, model, where):
    """The optimizer's saved state, checked, where it can be restored as Keras 3 restores it (by position, when
    the counts agree); else None."""
    if model.optimizer is None or not hdf5.has(f, "optimizer_weights", where):
        return None
    opt, slots = weights.optimizer_slots(model)
    group = hdf5.group(f, "optimizer_weights", where)
    names = hdf5.list_attribute(group, "weight_names")
    lead = 2 if weights.rate_is_variable(opt) else 1     # iterations, and the rate unless a schedule gives it
    if slots is None or len(names) != len(slots) + lead:
        warnings.warn(f"{where}: the file holds {len(names)} optimizer variables; optimizer {opt.name!r} "
                      f"({type(opt).__name__}) {'has ' + str(len(slots) + lead) if slots is not None else 'keeps none in Keras files'}, "
                      f"so its state is not restored (the weights are), as Keras skips it", stacklevel=4)
        return None
    iterations = hdf5.array(group, names[0], where)
    if iterations.shape != () or iterations.dtype.kind not in "iu":
        return None
    planned = [(s, weights.checked_value(s, hdf5.array(group, n, where), n, where)) for s, n in zip(slots, names[lead:])]
    return opt, int(iterations), planned
