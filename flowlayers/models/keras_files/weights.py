"""Keras 3's weights layout for a flowlayers model: the ``model.weights.h5`` of a ``.keras`` file, and a
``.weights.h5`` file (``model.save_weights("w.weights.h5")``), as Keras' ``H5IOStore`` writes them:

    layers/<class>[_<n>]/vars/0, 1, ...     a layer's variables, trainable ones first (attribute ``name``)
    layers/<class>/<sublayer>/vars/...      those Keras keeps in a sublayer (MultiHeadAttention's ``query_dense``,
                                            a recurrent layer's ``cell``: ``layer_table.SUBLAYERS``)
    optimizer/vars/0, 1, ...                iterations, learning_rate (none under a schedule), then the optimizer's
                                            slots in Keras' order, then its own state (Nadam's u_product)
    vars                                    the model's own (attribute ``name``)

A group is named as Keras names it: the snake_case Keras class, numbered in ``model.layers`` order (``dense``,
``dense_1``); a nested model's layers sit under its group's ``layers/``; a subclassed model's layers under their
attribute names.  Reading checks every array (present, shape, a dtype the variable takes) and refuses a file with
weights the model lacks before it assigns anything.
"""
import warnings

import numpy as np

from ... import dtypes, engine, env, optimizers as optimizers_mod
from ...errors import CheckpointError, describe_shape
from ...layers.base import Layer
from . import atomic, hdf5, layer_table

#: Keras' optimizer variables after iterations and learning_rate, per flowlayers optimizer: each tuple is one call
#: of Keras' ``add_optimizer_variables`` (its slots interleaved per variable), in the order Keras makes them
SLOT_ORDER = {optimizers_mod.Adam: [("m", "v")], optimizers_mod.AdamW: [("m", "v")], optimizers_mod.SGD: [("momentum",)],
              optimizers_mod.RMSprop: [("velocity",), ("momentum",), ("average_gradient",)],
              optimizers_mod.Adagrad: [("accumulator",)], optimizers_mod.Adamax: [("momentum", "norm")],
              optimizers_mod.Adadelta: [("accumulated_grad", "accumulated_delta_var")],
              optimizers_mod.Lion: [("momentum",)], optimizers_mod.Nadam: [("momentum", "velocity")],
              optimizers_mod.Ftrl: [("accumulator", "linear")]}


class Group:
    """One ``vars`` group: its path, the name Keras records on it, and the variables it holds in Keras' order."""

    def __init__(self, path, name, variables=()):
        self.path, self.name, self.variables = path, name, list(variables)

    @property
    def vars_path(self):
        return f"{self.path}/vars" if self.path else "vars"


def groups(model):
    """Every group of ``model``'s layers, in Keras' order (groups without variables included: Keras writes them)."""
    out = [Group("", model.name)]
    _model_groups(model, "", out)
    return out


def _model_groups(model, prefix, out):
    kind = layer_table.model_kind(model)
    if kind is not None:
        used = {}
        if kind == "Functional":        # a functional model lists its InputLayers (a Sequential does not)
            for _ in model.inputs:
                out.append(Group(f"{prefix}layers/{_numbered('input_layer', used)}", "input_layer"))
        for layer in model.layers:
            _layer_groups(layer, f"{prefix}layers/{_numbered(_keras_class(layer), used)}", out)
        return
    for attr, value in _attributes(model):       # a subclassed model: its layers by attribute, as Keras walks them
        if isinstance(value, Layer):
            _layer_groups(value, f"{prefix}{attr}", out)
        else:
            used = {}
            for layer in value:
                _layer_groups(layer, f"{prefix}{attr}/{_numbered(_keras_class(layer), used)}", out)


def _layer_groups(layer, path, out):
    if hasattr(layer, "trainer"):       # a nested model: its own group, its layers below it
        out.append(Group(path, layer.name))
        _model_groups(layer, f"{path}/", out)
        return
    own = Group(path, layer.name)
    out.append(own)
    subs, cls = {}, _keras_class(layer, snake=False)
    for w in keras_order(layer):
        sub = layer_table.sublayer_of(cls, _relative(w.path, layer.name))
        if not sub:
            own.variables.append(w)
            continue
        if sub not in subs:
            subs[sub] = Group(f"{path}/{sub}", sub.rsplit("/", 1)[-1])
            out.append(subs[sub])
        subs[sub].variables.append(w)


def keras_order(layer):
    """A layer's weights as Keras keeps them: those made trainable first, then the others (each in the order made;
    freezing a layer does not move them)."""
    made_trainable = [w for w in layer.weights if w._trainable]     # declared, whatever freezing says now
    return made_trainable + [w for w in layer.weights if not w._trainable]


def _attributes(model):
    """A subclassed model's layers (and lists of them) by attribute, in Keras' order: public names sorted, then
    private ones; flowlayers' own record of the traced layers (``_layers``) is not one."""
    items = [(k, v) for k, v in vars(model).items() if k != "_layers" and v is not model and (
        isinstance(v, Layer) or (isinstance(v, (list, tuple)) and v and all(isinstance(x, Layer) for x in v)))]
    return sorted(items, key=lambda kv: "~" + kv[0] if kv[0].startswith("_") else kv[0])


def _keras_class(layer, snake=True):
    name = layer_table.keras_name(layer) or type(layer).__name__
    if hasattr(layer, "trainer"):       # a nested model, by the class Keras gives it
        name = layer_table.model_kind(layer) or type(layer).__name__
    return layer_table.snake_case(name) if snake else name


def _numbered(name, used):
    """Keras' names within one container: ``dense``, ``dense_1``, ``dense_2`` ..."""
    if name in used:
        used[name] += 1
        return f"{name}_{used[name]}"
    used[name] = 0
    return name


def _relative(path, layer_name):
    return path[len(layer_name) + 1:] if path.startswith(layer_name + "/") else path


# The optimizer -------------------------------------------------------------
def optimizer_slots(model):
    """(optimizer, [slot Variable, ...] in Keras' order), or (optimizer or None, None) where Keras' layout has no
    place for its state: no optimizer, or one that is not Keras' SGD, Adam, AdamW or RMSprop as such."""
    opt = model.optimizer
    if opt is None or unsaved_optimizer(opt) is not None:
        return opt, None
    trainable = [w for w in model.trainable_weights]
    names = list(opt.all_slot_names)
    calls = ([("gradient_accumulator",)] if "gradient_accumulator" in names else []) + SLOT_ORDER[type(opt)]
    slots = []
    for call in calls:
        call = [s for s in call if s in names]
        for w in trainable:
            held = dict(zip(opt.all_slot_names, opt.slots(w)))
            slots += [held[s] for s in call]
    return opt, slots + list(opt.state_variables().values())     # Nadam's u_product: Keras makes it last


def unsaved_optimizer(opt):
    """Why ``opt``'s state has no place in a Keras file (its name and kind), or None where it has one."""
    if opt is None or (type(opt) in SLOT_ORDER and (rate_is_variable(opt) or isinstance(
            opt.learning_rate, optimizers_mod.schedules.LearningRateSchedule))):
        return None
    kind = "a learning_rate callable" if type(opt) in SLOT_ORDER else f"class {type(opt).__name__}"
    return (f"optimizer {opt.name!r} ({kind}) is not one whose state Keras' files hold (Keras' "
            f"{', '.join(sorted(c.__name__ for c in SLOT_ORDER))} with a number or a schedule as learning_rate)")


def rate_is_variable(opt):
    """Whether Keras keeps ``opt``'s learning rate among its variables (after ``iterations``): a number, yes; a
    schedule is config, with no variable."""
    return not callable(opt.learning_rate)


# Writing -------------------------------------------------------------------
def values(model, include_optimizer=True):
    """``{group path: (name, [arrays])}`` and the optimizer's ``(name, [arrays])`` (or None): the logical values,
    gathered in every process (a collective read)."""
    out = {g.vars_path: (g.name, [w.numpy() for w in g.variables]) for g in groups(model)}
    opt, slots = optimizer_slots(model) if include_optimizer else (None, None)
    optimizer = None
    if slots is not None:
        rate = [np.asarray(opt.learning_rate, np.float32)] if rate_is_variable(opt) else []
        optimizer = (opt.name, [np.asarray(opt.iterations, np.int64)] + rate + [s.numpy() for s in slots])
    return out, optimizer


def write(f, layer_values, optimizer):
    """Write ``values``' arrays into the open h5py File ``f`` in Keras' layout."""
    for path, (name, arrays) in layer_values.items():
        group = f.create_group(path)
        group.attrs["name"] = name
        for i, value in enumerate(arrays):
            hdf5.write_array(group, str(i), value)
    if optimizer is not None:
        group = f.create_group("optimizer/vars")
        group.attrs["name"] = optimizer[0]
        for i, value in enumerate(optimizer[1]):
            hdf5.write_array(group, str(i), value)


def save_weights(model, filepath, where):
    """A ``.weights.h5`` file: every process reads the values, process 0 writes them (atomically)."""
    hdf5.require(where)
    model.require_built("save_weights")
    layer_values, optimizer = values(model)
    if env.process_index() == 0:
        with atomic.replacing(filepath, where) as tmp, hdf5.h5py.File(tmp, "w") as f:
            write(f, layer_values, optimizer)
    engine.barrier(f"{where} {filepath}")
    _warn_unsaved(model, where)


def _warn_unsaved(model, where):
    reason = unsaved_optimizer(model.optimizer)
    if reason is not None:
        warnings.warn(f"{where}: the weights were saved without the optimizer state: {reason}; a path without "
                      f".keras/.h5 (flowlayers' checkpoint directory) holds it", stacklevel=3)


# Reading -------------------------------------------------------------------
def load_weights(model, filepath, where):
    """A ``.weights.h5`` file into ``model``."""
    model.require_built("load_weights")
    with hdf5.reading(filepath, where) as f:
        read(f, model, where)


def read(f, model, where, optimizer=True):
    """Check every array the open file ``f`` holds for ``model`` (and its optimizer's state, where the model has a
    Keras optimizer and the file as many of its variables), then assign them all."""
    plan = []
    expected = set()
    for g in groups(model):
        if not g.variables:
            continue
        expected.add(g.vars_path)
        held = _held(f, g.vars_path, where)
        if len(held) != len(g.variables):
            raise CheckpointError(f"{where}: layer group {g.path!r} ({g.name}) expected {len(g.variables)} "
                                  f"variable(s) ({', '.join(w.path for w in g.variables)}), received {len(held)}; "
                                  f"load it into a model built like the one that saved it")
        for i, w in enumerate(g.variables):
            plan.append((w, checked_value(w, hdf5.array(f, f"{g.vars_path}/{i}", where), f"{g.vars_path}/{i}", where)))
    extra = sorted(p for p in _groups_with_arrays(f) if p not in expected and not p.startswith("optimizer/"))
    if extra:
        raise CheckpointError(f"{where}: the file holds weights in {extra[:5]}{' ...' if len(extra) > 5 else ''}, "
                              f"which the model does not have (a file of a bigger or other architecture); "
                              f"expected only the model's layers {sorted(expected)[:5]}")
    state = _optimizer_plan(f, model, where) if optimizer else None
    for w, value in plan:
        w.assign(value)
    if state is not None:
        opt, iterations, learning_rate, slots = state
        for w, value in slots:
            w.assign(value)
        opt.iterations = iterations
        if learning_rate is not None and np.float32(opt.learning_rate) != np.float32(learning_rate):
            opt.learning_rate = float(learning_rate)     # changed since the config (ReduceLROnPlateau)


def _held(f, path, where):
    if not hdf5.has(f, path, where):
        raise CheckpointError(f"{where}: expected the group {path!r} in the file, received a file without it (a "
                              f"file of another architecture); load it into a model built like the one that saved "
                              f"it")
    return hdf5.names(hdf5.group(f, path, where))


def _groups_with_arrays(f):
    found = []

    def visit(name, obj):
        if name.endswith("vars") and isinstance(obj, hdf5.h5py.Group) and len(obj):
            found.append(name)
    f.visititems(visit)
    return found


def checked_value(var, value, path, where):
    """``value`` for ``var``: its shape, and a float for a float variable (cast, as Keras loads), else its dtype."""
    if value.shape != var.shape:
        raise CheckpointError(f"{where}: {path} (variable {var.path!r}) expected shape {describe_shape(var.shape)}, "
                              f"received {describe_shape(value.shape)}; load it into a model built like the one "
                              f"that saved it")
    own = np.dtype(var.dtype.numpy)
    floats = value.dtype.kind == "f" or value.dtype == np.dtype(dtypes.bfloat16.numpy)
    if not (var.dtype.is_floating and floats) and value.dtype != own:
        raise CheckpointError(f"{where}: {path} (variable {var.path!r}) expected dtype {var.dtype.name}, received "
                              f"{value.dtype}")
    return var.checked(value if value.dtype == own else value.astype(own))


def _optimizer_plan(f, model, where):
    """(optimizer, iterations, learning_rate, [(slot, value)]) checked, or None where nothing is restored: no
    optimizer state in the file or no optimizer in the model (as Keras), or counts that differ (a warning, as
    Keras)."""
    if not hdf5.has(f, "optimizer/vars", where) or model.optimizer is None:
        return None
    opt, slots = optimizer_slots(model)
    if slots is None:
        warnings.warn(f"{where}: the file holds optimizer state, not restored: {unsaved_optimizer(opt)}",
                      stacklevel=4)
        return None
    held = hdf5.names(hdf5.group(f, "optimizer/vars", where))
    lead = 2 if rate_is_variable(opt) else 1      # iterations, and the learning rate unless a schedule gives it
    if len(held) != len(slots) + lead:
        warnings.warn(f"{where}: optimizer {opt.name!r} has {len(slots) + lead} variables but the file holds "
                      f"{len(held)}; its state is not restored (the weights are), as Keras skips it", stacklevel=4)
        return None
    iterations = hdf5.array(f, "optimizer/vars/0", where)
    learning_rate = hdf5.array(f, "optimizer/vars/1", where) if lead == 2 else np.float32(0.0)
    if iterations.shape != () or iterations.dtype.kind not in "iu" or iterations < 0 or \
            learning_rate.shape != () or learning_rate.dtype.kind != "f":
        raise CheckpointError(f"{where}: optimizer/vars/0 and /1 expected the step count (an int) and the learning "
                              f"rate (a float), received {iterations.dtype}{iterations.shape} and "
                              f"{learning_rate.dtype}{learning_rate.shape}")
    planned = [(s, checked_value(s, hdf5.array(f, f"optimizer/vars/{i + lead}", where),
                                 f"optimizer/vars/{i + lead}", where)) for i, s in enumerate(slots)]
    return opt, int(iterations), float(learning_rate) if lead == 2 else None, planned
