"""Export: a predict Program with its logical weights as a TensorFlow SavedModel, as Keras 3's ``model.export``
writes one: a ``serve`` endpoint (also the ``serving_default`` signature, for TensorFlow Serving) taking the model's
inputs, the weights its variables.

The Program is lowered on one device with the kernels a step uses (``lowering.run_graph`` with a plain
``LoweringContext``: no DTensor, no strategy, channels-last kernels that every device runs), on the whole logical
weights, whatever view or mesh trained them.
"""
import tensorflow as tf

from flowlayers.backend_common import exported_inputs, nested, tensor_name
from flowlayers.errors import ConfigError

from .lowering import LoweringContext, run_graph


def export(program, weights, spec, filepath):
    if spec.format != "tf_saved_model":
        raise ConfigError(f"the tensorflow backend writes format 'tf_saved_model', received {spec.format!r}")
    if spec.options:
        raise ConfigError(f"export(format='tf_saved_model') on the tensorflow backend: unexpected option(s) "
                          f"{sorted(spec.options)}; expected none (jax2tf_kwargs is the jax backend's)")
    module = tf.Module()
    paths = list(weights)
    module.weights = [tf.Variable(weights[p], trainable=False, name=f"weight_{k}") for k, p in enumerate(paths)]
    specs = [tf.TensorSpec(shape, dtype, name=tensor_name(name)) for name, shape, dtype in spec.inputs]
    signature = [nested(arg, specs) for arg in spec.arguments]

    @tf.function(input_signature=signature, autograph=False)
    def serve(*arguments):
        env = dict(zip(program.inputs, exported_inputs(spec, arguments)))
        ctx = LoweringContext(program.phase, tf.constant(1, tf.int64), spec.seed, native_nchw=False)
        run_graph(program, env, dict(zip(paths, module.weights)), ctx)
        return nested(spec.outputs, [tf.convert_to_tensor(env[b]) for b in program.outputs])

    module.serve = serve
    tf.saved_model.save(module, filepath, signatures={"serving_default": serve.get_concrete_function()})
    return "TensorFlow"


def load(filepath, format):
    """A SavedModel's ``serve`` endpoint, returning host arrays."""
    if format != "tf_saved_model":
        raise ConfigError(f"the tensorflow backend loads artifacts of format 'tf_saved_model', received {format!r}")
    loaded = tf.saved_model.load(filepath)      # held by the callable: its variables live as long as it

    def serve(*arguments):
        return tf.nest.map_structure(lambda t: t.numpy(), loaded.serve(*arguments))
    serve.loaded = loaded
    return serve
