"""Export: a predict Program with its logical weights as an artifact a process without flowlayers serves.

Both formats start from one JAX function of (weights, arguments), the Program lowered on one device with the
kernels a step uses (``lowering.run_graph``, no sharding: the weights are whole logical values):

- ``jax``: that function serialized by ``jax.export`` (StableHLO), a free dim of an input (None: the batch) left
  symbolic, beside the weights in ``weights.npz`` and a manifest.  ``jax.export.deserialize`` and numpy load it.
- ``tf_saved_model``: that function converted by ``jax2tf`` into a TensorFlow SavedModel whose ``serve`` endpoint
  takes the model's inputs (the weights its variables), as Keras 3 exports from its JAX backend.
"""
import importlib.util
import json
import os

import jax
import numpy as np
from jax import export as jax_export

from flowlayers.backend_common import exported_inputs, nested, tensor_name
from flowlayers.errors import ConfigError

from . import devices
from .lowering import Context, run_graph

MANIFEST, PROGRAM, WEIGHTS = "flowlayers_export.json", "model.jax", "weights.npz"


def function(program, paths, spec):
    """``fn(weights, *arguments)``: the Program's outputs, nested as ``spec.outputs``, for ``weights`` (one array
    per path of ``paths``) and the endpoint's ``arguments``; the predict step's randomness (step 1, ``spec.seed``)."""
    def fn(weights, *arguments):
        env = dict(zip(program.inputs, exported_inputs(spec, arguments)))
        run_graph(program, env, dict(zip(paths, weights)), Context(program.phase, 1, spec.seed))
        return nested(spec.outputs, [env[b] for b in program.outputs])
    return fn


def export(program, weights, spec, filepath):
    devices.reserve()       # lowering starts JAX (on any backend): with the devices a later runtime needs
    paths = list(weights)
    values = [np.asarray(weights[p]) for p in paths]
    fn = function(program, paths, spec)
    if spec.format == "jax":
        return _write_jax(fn, paths, values, spec, filepath)
    return _write_saved_model(fn, values, spec, filepath)


def _symbolic(spec):
    """Each input's shape with its free dims as symbols of one scope: ``b`` for the batch (shared by the inputs),
    ``d<input>_<dim>`` for another."""
    scope = jax_export.SymbolicScope()
    shapes = []
    for k, (_, shape, _) in enumerate(spec.inputs):
        dims = ["b" if d is None and i == 0 else f"d{k}_{i}" if d is None else str(d) for i, d in enumerate(shape)]
        shapes.append(jax_export.symbolic_shape(", ".join(dims), scope=scope) if dims else ())
    return shapes


def _arguments(spec, make):
    """The endpoint's arguments with each leaf (an input index) made ``make(index)``."""
    return [nested(arg, [make(i) for i in range(len(spec.inputs))]) for arg in spec.arguments]


def _write_jax(fn, paths, values, spec, filepath):
    unknown = sorted(set(spec.options) - {"platforms"})
    if unknown:
        raise ConfigError(f"export(format='jax'): unexpected option(s) {unknown}; expected only platforms (the "
                          f"platforms to lower for, e.g. ('cpu', 'cuda'))")
    shapes = _symbolic(spec)
    inputs = _arguments(spec, lambda i: jax.ShapeDtypeStruct(shapes[i], np.dtype(spec.inputs[i][2])))
    weights = [jax.ShapeDtypeStruct(v.shape, v.dtype) for v in values]
    exported = jax_export.export(jax.jit(fn), **spec.options)(weights, *inputs)
    os.makedirs(filepath, exist_ok=True)
    with open(os.path.join(filepath, PROGRAM), "wb") as f:
        f.write(exported.serialize())
    np.savez(os.path.join(filepath, WEIGHTS), *values)      # arr_0, arr_1, ...: in the order of "weights"
    manifest = {"format": "jax", "version": 1, "weights": paths,
                "inputs": [{"name": n, "shape": list(s), "dtype": d} for n, s, d in spec.inputs],
                "arguments": list(spec.arguments), "outputs": spec.outputs, "platforms": list(exported.platforms)}
    with open(os.path.join(filepath, MANIFEST), "w") as f:
        json.dump(manifest, f, indent=1)
    return f"jax.export, for {', '.join(exported.platforms)}"


def _write_saved_model(fn, values, spec, filepath):
    if importlib.util.find_spec("tensorflow") is None:
        raise ConfigError("export(format='tf_saved_model') on the jax backend: expected TensorFlow installed (the "
                          "model is converted by jax2tf), received none; pip install tensorflow-cpu, or export "
                          "with format='jax'")
    unknown = sorted(set(spec.options) - {"jax2tf_kwargs"})
    if unknown:
        raise ConfigError(f"export(format='tf_saved_model') on the jax backend: unexpected option(s) {unknown}; "
                          f"expected only jax2tf_kwargs (a dict of jax2tf.convert's arguments)")
    import tensorflow as tf
    from jax.experimental import jax2tf

    polymorphic = [None] + _arguments(spec, lambda i: "(" + ", ".join(
        "b" if d is None and j == 0 else f"d{i}_{j}" if d is None else str(d)
        for j, d in enumerate(spec.inputs[i][1])) + ")")
    options = {"polymorphic_shapes": polymorphic, "with_gradient": False, **spec.options.get("jax2tf_kwargs", {})}
    converted = jax2tf.convert(fn, **options)
    module = tf.Module()
    module.weights = [tf.Variable(v, trainable=False, name=f"weight_{k}") for k, v in enumerate(values)]
    signature = _arguments(spec, lambda i: tf.TensorSpec(spec.inputs[i][1], spec.inputs[i][2],
                                                         name=tensor_name(spec.inputs[i][0])))

    @tf.function(input_signature=signature, autograph=False)
    def serve(*arguments):
        return converted(list(module.weights), *arguments)

    module.serve = serve
    tf.saved_model.save(module, filepath, signatures={"serving_default": serve.get_concrete_function()})
    return "jax2tf"


def load(filepath, format):
    """A ``jax`` artifact as a callable of host arrays, as the model's ``predict`` takes them (a SavedModel: its
    ``serve`` endpoint, through TensorFlow)."""
    if format == "tf_saved_model":
        import tensorflow as tf

        loaded = tf.saved_model.load(filepath)      # held by the callable: its variables live as long as it

        def serve(*arguments):
            return tf.nest.map_structure(lambda t: t.numpy(), loaded.serve(*arguments))
        serve.loaded = loaded
        return serve
    devices.reserve()       # calling the artifact starts JAX: with the devices a later runtime needs
    with open(os.path.join(filepath, MANIFEST)) as f:
        manifest = json.load(f)
    with open(os.path.join(filepath, PROGRAM), "rb") as f:
        exported = jax_export.deserialize(bytearray(f.read()))
    with np.load(os.path.join(filepath, WEIGHTS)) as stored:
        weights = [stored[f"arr_{k}"] for k in range(len(manifest["weights"]))]

    def call(*arguments):
        return jax.tree.map(np.asarray, exported.call(weights, *arguments))
    call.manifest = manifest
    return call

