"""What the TF backend does to compile steps faster must not change what they compute.

Step functions are optimised with flowlayers' grappler settings (graph_options.py): only the fields it names
change, the user's own settings stay, and every step — mirrored, consistent, one device — is first called under
them.  Variables that start from one constant share one initial value (variables.SharedConstants): updating one
leaves the others as they were, in every runtime.
"""
import numpy as np
import pytest

import flowlayers as flow
from flowlayers import engine

tf = pytest.importorskip("tensorflow")     # the imports below need it: without it the file is skipped
from tensorflow.core.protobuf import config_pb2, rewriter_config_pb2  # noqa: E402
from tensorflow.python.eager import context  # noqa: E402
from flowlayers_tensorflow.graph_options import step_options  # noqa: E402

pytestmark = pytest.mark.tensorflow_backend

RC = rewriter_config_pb2.RewriterConfig


def _options():
    return config_pb2.ConfigProto.FromString(context.context().function_call_options.config_proto_serialized)


@pytest.fixture
def user_disables_constant_folding():
    before = tf.config.optimizer.get_experimental_options()
    tf.config.optimizer.set_experimental_options({"constant_folding": False})
    yield
    tf.config.optimizer.set_experimental_options({"constant_folding": before.get("constant_folding", True)})


@pytest.mark.parametrize("cpu", [True, False])
def test_step_options_change_their_fields_only(cpu, user_disables_constant_folding):
    outside = context.context().function_call_options
    with step_options(cpu):
        inside = _options()
    rewrites = inside.graph_options.rewrite_options
    assert rewrites.memory_optimization == RC.NO_MEM_OPT
    assert rewrites.meta_optimizer_iterations == RC.ONE
    assert rewrites.disable_tfg_optimizer and not rewrites.disable_meta_optimizer
    assert rewrites.layout_optimizer == (RC.OFF if cpu else RC.DEFAULT)
    assert rewrites.constant_folding == RC.OFF          # the user's setting stands
    assert inside.allow_soft_placement                  # as TF's default for functions
    assert context.context().function_call_options is outside


def test_step_options_are_restored_after_an_error():
    outside = context.context().function_call_options
    with pytest.raises(RuntimeError), step_options(True):
        raise RuntimeError("inside")
    assert context.context().function_call_options is outside


def _model():
    x = flow.Input((6,))
    h = flow.layers.Dense(6, activation="relu")(x)
    model = flow.Model(x, flow.layers.Dense(3)(h))
    model.compile(optimizer=flow.optimizers.SGD(0.1, momentum=0.9),
                  loss=flow.losses.SparseCategoricalCrossentropy(from_logits=True))
    return model


@pytest.mark.parametrize("view,n", [("mirrored", 1), ("mirrored", 2), ("consistent", 2)])
def test_every_step_is_first_called_under_them(view, n, monkeypatch):
    flow.config.set_view(view)
    flow.config.gpu_device_num(n)
    rng = np.random.default_rng(0)
    x, y = rng.random((8, 6), dtype=np.float32), rng.integers(0, 3, 8)
    model = _model()
    model.fit(x, y, batch_size=8, epochs=1, verbose=0)      # makes the variables: what follows calls steps only
    calls = []
    real = context.Context.call_function

    def recording(self, name, tensor_inputs, num_outputs):
        calls.append((name, _options().graph_options.rewrite_options))
        return real(self, name, tensor_inputs, num_outputs)

    monkeypatch.setattr(context.Context, "call_function", recording)
    model.fit(x, y, batch_size=4, epochs=1, verbose=0)      # another batch size: steps traced and compiled again
    assert len(calls) >= 2
    for name, rewrites in calls:
        assert rewrites.memory_optimization == RC.NO_MEM_OPT and rewrites.disable_tfg_optimizer, name


@pytest.mark.parametrize("view,n", [("mirrored", 1), ("mirrored", 2), ("consistent", 2)])
def test_variables_sharing_an_initial_value_stay_apart(view, n):
    flow.config.set_view(view)
    flow.config.gpu_device_num(n)
    zeros = flow.initializers.get(flow.zeros_initializer())
    a, b = (flow.Variable(name, (4, 4), flow.float32, zeros) for name in ("shared_a", "shared_b"))
    placement = flow.config.placement()
    runtime = engine.runtime(placement)
    handles = [v.handle_in(runtime, placement) for v in (a, b)]
    handles[0].assign_add(tf.ones((4, 4)) if view != "consistent" else
                          runtime.to_mesh(np.ones((4, 4), np.float32), handles[0].layout))
    a.assign(a.numpy() * 3)
    np.testing.assert_array_equal(a.numpy(), np.full((4, 4), 3.0))
    np.testing.assert_array_equal(b.numpy(), np.zeros((4, 4)))
