"""Keras 3's custom steps: ``train_step`` / ``test_step`` / ``predict_step`` overridden in a Model subclass, written
as keras.io's guide "Customizing what happens in fit()" writes them (``tf.GradientTape`` -> ``flow.GradientTape``),
traced once and compiled; equal to Keras 3 running the same step from the same weights, in both views on 2 devices.
What cannot be planned is refused by name."""
import keras
import numpy as np
import pytest

import flowlayers as flow

tf = pytest.importorskip("tensorflow")     # used beside the backend under test: without it the file is skipped
pytestmark = pytest.mark.needs_tensorflow


def _custom_model_class(k, tape_class):
    """keras.io's CustomModel (the library ``k`` and its tape swapped), with a counter showing the step ran."""
    class CustomModel(k.Model):
        traced = 0

        def train_step(self, data):
            type(self).traced += 1
            x, y = data
            with tape_class() as tape:
                y_pred = self(x, training=True)
                loss = self.compute_loss(y=y, y_pred=y_pred)
            trainable_vars = self.trainable_variables
            gradients = tape.gradient(loss, trainable_vars)
            self.optimizer.apply(gradients, trainable_vars)
            for metric in self.metrics:
                if metric.name == "loss":
                    metric.update_state(loss)
                else:
                    metric.update_state(y, y_pred)
            return {m.name: m.result() for m in self.metrics}

        def test_step(self, data):
            x, y = data
            y_pred = self(x, training=False)
            loss = self.compute_loss(y=y, y_pred=y_pred)
            for metric in self.metrics:
                if metric.name == "loss":
                    metric.update_state(loss)
                else:
                    metric.update_state(y, y_pred)
            return {m.name: m.result() for m in self.metrics}

        def predict_step(self, data):
            return {"probabilities": k.ops.softmax(self(data, training=False)) if k is keras else
                    flow.ops.softmax(self(data, training=False))}
    return CustomModel


def _model(k, tape_class):
    inputs = k.Input((8,))
    hidden = k.layers.Dense(16, activation="relu", name="hidden")(inputs)
    outputs = k.layers.Dense(3, name="logits")(hidden)
    model = _custom_model_class(k, tape_class)(inputs, outputs)
    return model


@pytest.fixture(scope="module")
def data():
    rng = np.random.default_rng(3)
    return rng.normal(size=(40, 8)).astype("float32"), rng.integers(0, 3, size=40).astype("int32")


def _compiled(k, tape_class):
    model = _model(k, tape_class)
    model.compile(optimizer=k.optimizers.Adam(0.01),
                  loss=k.losses.SparseCategoricalCrossentropy(from_logits=True),
                  metrics=[k.metrics.SparseCategoricalAccuracy(name="acc")])
    return model


@pytest.mark.slow
@pytest.mark.parametrize("view", ["consistent", "mirrored"])
def test_a_custom_train_step_trains_as_keras(data, view):
    x, y = data
    flow.config.set_view(view)
    flow.config.gpu_device_num(2)
    model, reference = _compiled(flow, flow.GradientTape), _compiled(keras, tf.GradientTape)
    reference.set_weights(model.get_weights())
    type(model).traced = 0
    ours = model.fit(x, y, batch_size=10, epochs=2, shuffle=False, verbose=0).history
    theirs = reference.fit(x, y, batch_size=10, epochs=2, shuffle=False, verbose=0).history
    assert type(model).traced == 1                     # traced once, then compiled: it ran
    assert sorted(ours) == sorted(theirs) == ["acc", "loss"]
    for key in ours:
        np.testing.assert_allclose(ours[key], theirs[key], rtol=1e-5, atol=1e-6)
    for a, b in zip(model.get_weights(), reference.get_weights()):
        np.testing.assert_allclose(a, b, atol=1e-5)
    ours_eval = model.evaluate(x, y, batch_size=16, verbose=0, return_dict=True)
    theirs_eval = reference.evaluate(x, y, batch_size=16, verbose=0, return_dict=True)
    for key in theirs_eval:
        np.testing.assert_allclose(ours_eval[key], theirs_eval[key], rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(model.predict(x[:7], verbose=0)["probabilities"],
                               reference.predict(x[:7], verbose=0)["probabilities"], atol=1e-5)


class Counting(flow.Model):
    calls = 0

    def train_step(self, data):
        type(self).calls += 1
        return super().train_step(data)


def test_the_default_train_step_through_super_runs_and_counts():
    x = flow.Input((4,))
    model = Counting(x, flow.layers.Dense(1)(x))
    model.compile(flow.optimizers.SGD(0.1), loss="mse")
    before = model.get_weights()[0].copy()
    logs = model.train_on_batch(np.ones((6, 4), np.float32), np.zeros((6, 1), np.float32), return_dict=True)
    assert Counting.calls == 1 and sorted(logs) == ["loss"]
    assert not np.allclose(model.get_weights()[0], before)


def _step_model(step):
    class Stepping(flow.Model):
        def train_step(self, data):
            return step(self, data)
    x = flow.Input((4,))
    model = Stepping(x, flow.layers.Dense(1)(x))
    model.compile(flow.optimizers.SGD(0.1), loss="mse")
    return model


def _gradients(model, data):
    x, y = data
    with flow.GradientTape() as tape:
        loss = model.compute_loss(y=y, y_pred=model(x, training=True))
    return loss, tape.gradient(loss, model.trainable_variables)


@pytest.mark.parametrize("step, error, match", [
    (lambda m, d: (m.optimizer.apply([g * 0.5 for g in _gradients(m, d)[1]], m.trainable_variables), {})[1],
     flow.GraphError, "arithmetic on a gradient cannot be planned"),
    (lambda m, d: {"loss": 1.0} if flow.ops.mean(_gradients(m, d)[0]) else {},
     flow.GraphError, "has no value while the graph is built"),
    (lambda m, d: {"loss": np.asarray(flow.ops.convert_to_numpy(_gradients(m, d)[0]))},
     flow.GraphError, "has no value while the graph is built"),
    (lambda m, d: (m.optimizer.apply(_gradients(m, d)[1], m.trainable_variables[::-1]), {})[1],
     flow.GraphError, "was given for"),
    (lambda m, d: {"loss": "fine"}, flow.GraphError, "log 'loss' expected a Blob, a metric's result"),
])
def test_forms_that_cannot_be_planned_are_refused_by_name(step, error, match):
    model = _step_model(step)
    with pytest.raises(error, match=match):
        model.fit(np.ones((4, 4), np.float32), np.zeros((4, 1), np.float32), verbose=0)
    assert model.evaluate(np.ones((4, 4), np.float32), np.zeros((4, 1), np.float32), verbose=0) >= 0


def test_a_tape_and_an_apply_outside_a_step_are_refused():
    x = flow.Input((4,))
    model = flow.Model(x, flow.layers.Dense(1)(x))
    with pytest.raises(flow.GraphError, match="expected inside a model's train_step"):
        flow.GradientTape().gradient(model.outputs[0], model.trainable_variables)
    with pytest.raises(flow.GraphError, match="Adam.apply: expected inside a model's train_step"):
        flow.optimizers.Adam().apply([None], model.trainable_variables[:1])


@pytest.mark.parametrize("eager", [lambda loss: np.asarray(loss) * 2, lambda loss: float(loss)])
def test_eager_numpy_on_a_traced_value_is_refused_by_name(eager):
    model = _step_model(lambda m, d: {"loss": eager(_gradients(m, d)[0])})
    with pytest.raises(flow.GraphError, match="has no value while the graph is built"):
        model.fit(np.ones((4, 4), np.float32), np.zeros((4, 1), np.float32), verbose=0)


def test_a_value_read_after_the_last_apply_sees_the_updated_weights():
    """A Blob made after the apply that changed what it reads is computed by one more program, after the update;
    the loss, made before it, by the stage itself."""
    def step(model, data):
        loss, grads = _gradients(model, data)
        model.optimizer.apply(grads, model.trainable_variables)
        return {"loss": loss, "after": model(data[0])}

    model = _step_model(step)
    x, y = np.random.default_rng(0).normal(size=(6, 4)).astype("float32"), np.ones((6, 1), np.float32)
    before = model.predict(x, verbose=0)
    logs = model.train_on_batch(x, y, return_dict=True)
    np.testing.assert_allclose(logs["loss"], np.mean((before - 1.0) ** 2), rtol=1e-6)
    np.testing.assert_allclose(logs["after"], model.predict(x, verbose=0).mean(), rtol=1e-6)
    assert abs(logs["after"] - before.mean()) > 1e-3


def test_an_apply_in_a_test_step_is_refused():
    class Evaluating(flow.Model):
        def test_step(self, data):
            loss, grads = _gradients(self, data)
            self.optimizer.apply(grads, self.trainable_variables)
            return {"loss": loss}

    x = flow.Input((4,))
    model = Evaluating(x, flow.layers.Dense(1)(x))
    model.compile(flow.optimizers.SGD(0.1), loss="mse")
    with pytest.raises(flow.GraphError, match="SGD.apply: expected in a train_step"):
        model.evaluate(np.ones((4, 4), np.float32), np.zeros((4, 1), np.float32), verbose=0)


class KerasTwoStyle(flow.Model):
    """The Keras 2 names a custom step still finds in Keras 3's TensorFlow trainer."""

    def train_step(self, data):
        x, y = data
        with flow.GradientTape() as tape:
            y_pred = self(x, training=True)
            loss = self.compiled_loss(y, y_pred, regularization_losses=self.losses)
        self.optimizer.apply_gradients(zip(tape.gradient(loss, self.trainable_variables), self.trainable_variables))
        self.compiled_metrics.update_state(y, y_pred)
        return {m.name: m.result() for m in self.metrics}


def test_keras_two_names_compiled_loss_and_compiled_metrics():
    x = flow.Input((4,))
    model = KerasTwoStyle(x, flow.layers.Dense(1)(x))
    model.compile(flow.optimizers.SGD(0.1), loss="mse", metrics=[flow.metrics.MeanAbsoluteError(name="mae")])
    data = np.random.default_rng(1).normal(size=(8, 4)).astype("float32"), np.ones((8, 1), np.float32)
    before = model.predict(data[0], verbose=0)
    logs = model.train_on_batch(*data, return_dict=True)
    assert list(logs) == ["loss", "mae"] and logs["loss"] == 0.0     # the loss tracker, not updated: 0, as Keras
    np.testing.assert_allclose(logs["mae"], np.mean(np.abs(before - 1.0)), rtol=1e-6)


@pytest.mark.slow
def test_a_dataset_feeds_the_custom_step_its_elements(data):
    """A tf.data.Dataset's elements are the step's data, as Keras hands them: the same training as arrays give;
    predict_on_batch runs the predict_step."""
    x, y = data
    by_arrays, by_dataset = _compiled(flow, flow.GradientTape), _compiled(flow, flow.GradientTape)
    by_dataset.set_weights(by_arrays.get_weights())
    ours = by_arrays.fit(x, y, batch_size=10, epochs=1, shuffle=False, verbose=0).history
    theirs = by_dataset.fit(tf.data.Dataset.from_tensor_slices((x, y)).batch(10), epochs=1, verbose=0).history
    np.testing.assert_allclose(ours["loss"], theirs["loss"], rtol=1e-6)
    for a, b in zip(by_arrays.get_weights(), by_dataset.get_weights()):
        np.testing.assert_allclose(a, b, atol=1e-6)
    np.testing.assert_allclose(by_arrays.predict_on_batch(x[:3])["probabilities"].sum(axis=1), 1.0, rtol=1e-6)
