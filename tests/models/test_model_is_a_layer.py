"""A Model is a Layer (one weights API), subclassed models with ``call`` are built by tracing and train as the same
functional model does, a Sequential without an Input is built at its first call, and a custom ``train_step`` is
refused by name, never silently replaced by the compiled step."""
import numpy as np
import pytest

import flowlayers as flow

RNG = np.random.default_rng(7)
X = RNG.standard_normal((64, 6)).astype(np.float32)
Y = RNG.integers(0, 3, 64).astype(np.int32)


class MLP(flow.Model):
    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.hidden = flow.layers.Dense(8, activation="relu", name="hidden")
        self.out = flow.layers.Dense(3, name="out")

    def call(self, x):
        return self.out(self.hidden(x))


class Scaled(flow.Model):
    """A subclassed model with a weight of its own, used in ``call``."""

    def __init__(self):
        super().__init__()
        self.dense = flow.layers.Dense(3, name="scaled_dense")

    def build(self, input_shape, dtypes=None):
        self.scale = self.add_weight("scale", (3,), initializer="ones")
        super().build(input_shape, dtypes)

    def call(self, x):
        return self.dense(x) * self.read(self.scale)


def functional_mlp():
    x = flow.Input((6,))
    return flow.Model(x, flow.layers.Dense(3, name="f_out")(flow.layers.Dense(8, activation="relu",
                                                                                 name="f_hidden")(x)))


def trained(model, epochs=2):
    model.compile(flow.optimizers.SGD(0.1), flow.losses.SparseCategoricalCrossentropy(from_logits=True))
    history = model.fit(X, Y, batch_size=16, epochs=epochs, shuffle=False, verbose=0)
    return history.history["loss"], model.get_weights()


def test_a_model_is_a_layer_with_one_weights_api():
    model = functional_mlp()
    assert isinstance(model, flow.layers.Layer)
    assert [w.path for w in model.weights] == ["f_hidden/kernel", "f_hidden/bias", "f_out/kernel", "f_out/bias"]
    assert [w.path for w in model.trainable_weights] == [w.path for w in model.weights]
    values = [np.full(w.shape, 0.5, np.float32) for w in model.weights]
    model.set_weights(values)
    for got, want in zip(model.get_weights(), values):
        np.testing.assert_array_equal(got, want)
    with pytest.raises(flow.InputError, match=r"Model 'model'\.set_weights: expected 4 arrays"):
        model.set_weights(values[:3])
    model.trainable = False
    assert model.trainable_weights == [] and len(model.non_trainable_weights) == 4
    model.trainable = True
    assert len(model.trainable_weights) == 4


@pytest.mark.parametrize("view", ["consistent", "mirrored"])
def test_a_subclassed_model_is_traced_at_fit_and_trains_as_the_same_functional_model(view):
    flow.config.set_view(view)
    flow.config.gpu_device_num(2)
    sub, fun = MLP(), functional_mlp()
    assert not sub.built and sub.layers == []
    sub.build((None, 6))
    assert sub.built and [layer.name for layer in sub.layers] == ["hidden", "out"]
    sub.set_weights(fun.get_weights())
    sub_losses, sub_weights = trained(sub)
    fun_losses, fun_weights = trained(fun)
    np.testing.assert_allclose(sub_losses, fun_losses, rtol=1e-6)
    for a, b in zip(sub_weights, fun_weights):
        np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-7)
    assert sub.predict(X[:5], verbose=0).shape == (5, 3)


def test_a_subclassed_model_builds_from_its_first_data_and_keeps_its_own_weights():
    model = Scaled()
    losses, _ = trained(model, epochs=1)          # built by fit from the data's shapes
    assert model.built and np.isfinite(losses[0])
    assert [w.path for w in model.weights] == ["scaled_dense/kernel", "scaled_dense/bias", "scaled/scale"]
    assert not np.array_equal(model.weights[-1].numpy(), np.ones(3))     # its own weight trained too
    lines = []
    model.summary(print_fn=lines.append)
    assert "scaled_dense (Dense)" in "\n".join(lines)


def test_a_subclassed_model_nests_in_a_functional_one_and_shares_its_weights():
    inner = MLP(name="inner")
    x = flow.Input((6,))
    outer = flow.Model(x, flow.layers.Softmax()(inner(x)))
    assert inner.built and inner in outer.layers
    assert [w.path for w in outer.weights] == [w.path for w in inner.weights]
    probabilities = outer.predict(X[:4], verbose=0)
    np.testing.assert_allclose(probabilities.sum(axis=1), 1.0, rtol=1e-6)


def test_a_sequential_without_an_input_is_built_at_its_first_call_on_a_blob():
    stack = flow.Sequential([flow.layers.Dense(4, name="s1"), flow.layers.Dense(2, name="s2")])
    x = flow.Input((6,))
    y = stack(x)
    assert stack.built and y.shape == (None, 2)
    model = flow.Model(x, y)
    assert [w.path for w in model.weights] == ["s1/kernel", "s1/bias", "s2/kernel", "s2/bias"]


@pytest.mark.parametrize("step", ["train_step", "test_step", "predict_step"])
def test_an_overridden_step_is_run_never_ignored(step):
    """An override is traced (once) by the method that runs it (tests/models/test_custom_steps.py has the rest)."""
    calls = []

    def custom(self, data):
        calls.append(data)
        return {"rows": 1.0} if step != "predict_step" else self(data)

    model = type("Custom", (MLP,), {step: custom})()
    model.compile("sgd", "sparse_categorical_crossentropy")
    x, y = np.ones((6, 4), np.float32), np.zeros(6, np.int32)
    run = {"train_step": lambda: model.fit(x, y, batch_size=3, verbose=0),
           "test_step": lambda: model.evaluate(x, y, batch_size=3, verbose=0),
           "predict_step": lambda: model.predict(x, batch_size=3, verbose=0)}[step]
    run()
    assert len(calls) == 1


def test_a_model_with_both_a_graph_and_a_call_is_refused():
    x = flow.Input((6,))
    with pytest.raises(flow.GraphError, match="expected either inputs and outputs .* or a call method"):
        MLP.__new__(MLP).__init__(inputs=x, outputs=flow.layers.Dense(2)(x))
