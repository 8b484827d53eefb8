"""From training to serving: ``model.export(path)`` writes an artifact that a process without flowlayers serves.

    model.export("served/digits")                      # a TensorFlow SavedModel, as Keras 3 writes one
    tf.saved_model.load("served/digits").serve(x)      # in any process with TensorFlow

    model.export("served/digits_jax", format="jax")    # a jax.export artifact and its weights
    flow.export.load("served/digits_jax")(x)           # or with jax and numpy alone (docs/howto/export.md)

The artifact holds the model's predict step, written from its logical weights (each variable's whole value, read
as ``var.numpy()`` reads it), so whatever view, device count or mesh trained the model, it computes what
``predict`` computes, on one device.  Formats: ``tf_saved_model`` (from the tensorflow backend directly, from the jax
backend through ``jax2tf``) and ``jax`` (``jax.export``: written by the jax backend, also for a model trained on
the tensorflow backend, where JAX is installed).  The backend that writes a format says so in its
``Capabilities.exports``; the front end hands it the Program, the weights and an ``ExportSpec``.
"""
import json
import os

import numpy as np

from . import engine
from .contract import ExportSpec
from .errors import ConfigError, InputError

FORMATS = ("tf_saved_model", "jax")
KERAS_ONLY = ("onnx", "openvino", "litert", "torch")    # Keras 3's other formats: no engine of ours writes them
MANIFEST = "flowlayers_export.json"     # the jax format's manifest (the jax backend writes it)


def export(program, placement, filepath, format, verbose, input_signature, options, takes, returns, what):
    """Write ``program`` (a model's predict Program) at ``filepath`` as ``format``, with the variables' values now.
    ``takes``: the model's inputs as the endpoint takes them by default (an index, or a list / dict of indices);
    ``returns``: its outputs as ``predict`` returns them; ``placement``: the settings in force (the backend, the
    seed); ``what`` names the call in errors.  Prints where the artifact went and its endpoint unless ``verbose``
    is False."""
    filepath = _path(filepath, what)
    if verbose not in (None, True, False):
        raise InputError(f"{what}: verbose expected True, False or None, received {verbose!r}")
    backend = writer(placement.backend, format, what)
    specs = [(x.name, tuple(x.shape), x.dtype.name) for x in program.inputs]
    arguments = [takes] if input_signature is None else signature_arguments(input_signature, program, specs, what)
    if input_signature is not None:
        specs = [(name, shape, dtype) for (name, _, dtype), shape in zip(specs, signature_shapes(
            input_signature, arguments, program, what))]
    spec = ExportSpec(format, tuple(specs), tuple(arguments), returns, placement.seed, dict(options))
    weights = {v.path: v.numpy() for v in program.variables}
    how = engine.backend(backend).export(program, weights, spec, filepath)
    if verbose is not False:
        print(describe(filepath, spec, how))


def writer(backend, format, what):
    """The backend that writes ``format``: ``backend`` (the model's) where it does, else another installed backend
    with its engine that does; refused by name where none can."""
    if format in KERAS_ONLY:
        raise ConfigError(f"{what}: format {format!r} is one of Keras 3's that flowlayers does not write; expected "
                          f"one of {list(FORMATS)}")
    if format not in FORMATS:
        raise ConfigError(f"{what}: format expected one of {list(FORMATS)}, received {format!r}")
    if format in engine.capabilities(backend).exports:
        return backend
    writers = [name for name in engine.available() if format in engine.capabilities(name).exports]
    usable = [name for name in writers if engine.has_engine(name)]
    if not usable:
        raise ConfigError(f"{what}: format {format!r} is written by the backend(s) {writers}, expected one with its "
                          f"engine installed, received none; install it (e.g. pip install 'flowlayers[jax]'), or "
                          f"export with format='tf_saved_model'")
    return usable[0]


def signature_arguments(input_signature, program, specs, what):
    """``input_signature`` (the endpoint's arguments: a list whose leaves, lists in order and dicts by input name,
    are one spec per model input in order) as arguments whose leaves are input indices."""
    if not isinstance(input_signature, (list, tuple)):
        raise InputError(f"{what}: input_signature expected a list of the endpoint's arguments (e.g. "
                         f"[tf.TensorSpec((None, 3), tf.float32)]), received {type(input_signature).__name__}")
    names = [name for name, _, _ in specs]
    counter = iter(range(1 << 30))

    def index(tree):
        if isinstance(tree, dict):
            if sorted(tree) != sorted(names):
                raise InputError(f"{what}: input_signature's dict expected the model's input names {names} as "
                                 f"keys, received {sorted(tree)}")
            return {key: names.index(key) for key in tree}
        if isinstance(tree, (list, tuple)):
            return [index(item) for item in tree]
        return next(counter)

    arguments = [index(arg) for arg in input_signature]
    flat = _leaf_order(arguments)
    if sorted(flat) != list(range(len(specs))):
        raise InputError(f"{what}: input_signature expected one spec per model input ({len(specs)}: {names}), "
                         f"received {len(flat)}")
    return arguments


def _leaf_order(tree):
    """The leaves of a nest in writing order (a dict in its own order)."""
    if isinstance(tree, dict):
        return [leaf for item in tree.values() for leaf in _leaf_order(item)]
    if isinstance(tree, (list, tuple)):
        return [leaf for item in tree for leaf in _leaf_order(item)]
    return [tree]


def signature_shapes(input_signature, arguments, program, what):
    """The shape each model input takes, from its spec in ``input_signature`` (anything with ``shape`` and
    ``dtype``: a ``tf.TensorSpec``, a ``jax.ShapeDtypeStruct``, an array, a ``flow.Input``), checked against the
    input: the same rank and dtype, a free dim (None) only where the model leaves it free."""
    shapes = [None] * len(program.inputs)
    for index, given in zip(_leaf_order(arguments), _leaf_order(_by_name(input_signature, arguments))):
        x = program.inputs[index]
        shape, dtype = _spec(given, f"{what}: input_signature for input {x.name!r}")
        want = tuple(x.shape)
        fits = len(shape) == len(want) and all(w is None or s == w for s, w in zip(shape, want))
        if not fits or dtype != x.dtype.name:
            raise InputError(f"{what}: input_signature for input {x.name!r} expected shape "
                             f"{_shape_text(want)} (None: any size; a size may be fixed there) and dtype "
                             f"{x.dtype.name}, received shape {_shape_text(shape)} and dtype {dtype}")
        shapes[index] = shape
    return shapes


def _by_name(signature, arguments):
    """``signature`` with each dict's values in the order of ``arguments``' dicts (their keys are input names)."""
    if isinstance(signature, dict):
        return {key: _by_name(signature[key], arguments[key]) for key in arguments}
    if isinstance(signature, (list, tuple)):
        return [_by_name(s, a) for s, a in zip(signature, arguments)]
    return signature


def _spec(given, what):
    """(shape with None for a free dim, dtype name) of a spec-like value."""
    shape, dtype = getattr(given, "shape", None), getattr(given, "dtype", None)
    if shape is None or dtype is None:
        raise InputError(f"{what}: expected a spec with shape and dtype (tf.TensorSpec, jax.ShapeDtypeStruct, an "
                         f"array, flow.Input), received {type(given).__name__}")
    dims = shape.as_list() if hasattr(shape, "as_list") else list(shape)
    name = dtype if isinstance(dtype, str) else getattr(dtype, "name", None)
    if not isinstance(name, str):
        name = np.dtype(dtype).name
    return tuple(None if d is None else int(d) for d in dims), name


def _shape_text(shape):
    return "(" + ", ".join("None" if d is None else str(d) for d in shape) + ("," if len(shape) == 1 else "") + ")"


def _path(filepath, what):
    if not isinstance(filepath, (str, os.PathLike)) or not os.fspath(filepath):
        raise InputError(f"{what}: filepath expected a directory path (str or pathlib.Path), received {filepath!r}")
    filepath = os.fspath(filepath)
    if os.path.isfile(filepath):
        raise InputError(f"{what}: filepath expected a directory to write the artifact in, received {filepath!r}, "
                         f"which is a file")
    return filepath


def describe(filepath, spec, how):
    """What ``export`` prints: where the artifact is, how it was made, and its endpoint."""
    inputs = {i: f"{name}: {_shape_text(shape)} {dtype}" for i, (name, shape, dtype) in enumerate(spec.inputs)}
    args = ", ".join(_text(arg, inputs) for arg in spec.arguments)
    endpoint = "serve" if spec.format == "tf_saved_model" else "call"
    return f"Saved artifact at {filepath!r} (format {spec.format!r}, by {how}). Endpoint {endpoint!r}: ({args})"


def _text(tree, leaves):
    if isinstance(tree, dict):
        return "{" + ", ".join(f"{k!r}: {_text(v, leaves)}" for k, v in tree.items()) + "}"
    if isinstance(tree, (list, tuple)):
        return "[" + ", ".join(_text(v, leaves) for v in tree) + "]"
    return leaves[tree]


def load(filepath):
    """An exported artifact as a callable of host arrays, as the model's ``predict`` takes them and returns its
    results: a ``jax`` artifact (through the jax backend), or a SavedModel's ``serve`` endpoint (through the
    tensorflow backend; ``tf.saved_model.load(path).serve`` is the same)."""
    filepath = os.fspath(filepath)
    if os.path.isfile(os.path.join(filepath, MANIFEST)):
        with open(os.path.join(filepath, MANIFEST)) as f:
            format = json.load(f).get("format")
    elif os.path.isfile(os.path.join(filepath, "saved_model.pb")):
        format = "tf_saved_model"
    else:
        raise InputError(f"flow.export.load: expected a directory written by model.export ({MANIFEST} or "
                         f"saved_model.pb in it), received {filepath!r}")
    native = "tensorflow" if format == "tf_saved_model" else "jax"     # the engine the format is written for
    readers = [name for name in engine.available() if format in engine.capabilities(name).exports
               and engine.capabilities(name).engine == native]
    usable = [name for name in readers if engine.has_engine(name)]
    if not usable:
        raise ConfigError(f"flow.export.load({filepath!r}): an artifact of format {format!r} expected {native} "
                          f"installed to read it, received none; install it")
    return engine.backend(usable[0]).load_export(filepath, format)
