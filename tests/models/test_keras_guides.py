"""Keras' guide "Training & evaluation with the built-in methods", as its reader writes it, with ``keras.`` changed
to ``flow.`` for the model API and fewer epochs, on real MNIST: arrays and tf.data, validation, callbacks, sample
and class weights, and a model with two inputs and two outputs.  Each part checks what the guide promises."""
import keras
import numpy as np
import pytest

import flowlayers as flow

tf = pytest.importorskip("tensorflow")     # used beside the backend under test: without it the file is skipped
pytestmark = pytest.mark.needs_tensorflow


@pytest.fixture(scope="module")
def mnist(shared_data):
    (x, y), _ = flow.data.load_mnist_arrays(shared_data)
    x = x.reshape(-1, 784).astype("float32") / 255
    return (x[:3000], y[:3000].astype("float32")), (x[3000:3600], y[3000:3600].astype("float32"))  # labels as floats


def get_uncompiled_model():
    inputs = flow.Input(shape=(784,), name="digits")
    x = flow.layers.Dense(64, activation="relu", name="dense_1")(inputs)
    x = flow.layers.Dense(64, activation="relu", name="dense_2")(x)
    outputs = flow.layers.Dense(10, activation="softmax", name="predictions")(x)
    return flow.Model(inputs=inputs, outputs=outputs)


def get_compiled_model():
    model = get_uncompiled_model()
    model.compile(optimizer=flow.optimizers.RMSprop(learning_rate=1e-3),
                  loss=flow.losses.SparseCategoricalCrossentropy(),
                  metrics=[flow.metrics.SparseCategoricalAccuracy()])
    return model


@pytest.mark.filterwarnings("ignore::UserWarning")
def test_the_api_overview_with_arrays(mnist):
    (x_train, y_train), (x_val, y_val) = mnist
    model = get_compiled_model()
    history = model.fit(x_train, y_train, batch_size=64, epochs=2, validation_data=(x_val, y_val), verbose=0)
    assert sorted(history.history) == ["loss", "sparse_categorical_accuracy", "val_loss",
                                       "val_sparse_categorical_accuracy"]
    assert history.history["loss"][1] < history.history["loss"][0]
    loss, accuracy = model.evaluate(x_val, y_val, batch_size=128, verbose=0)
    assert accuracy > 0.8
    predictions = model.predict(x_val[:3], verbose=0)
    assert predictions.shape == (3, 10)
    np.testing.assert_allclose(predictions.sum(axis=1), 1.0, rtol=1e-5)


def test_tf_data_with_callbacks(mnist, tmp_path):
    (x_train, y_train), (x_val, y_val) = mnist
    train_dataset = tf.data.Dataset.from_tensor_slices((x_train, y_train)).shuffle(1024, seed=0).batch(64)
    val_dataset = tf.data.Dataset.from_tensor_slices((x_val, y_val)).batch(64)
    model = get_compiled_model()
    callbacks = [keras.callbacks.EarlyStopping(monitor="val_loss", min_delta=1e-2, patience=1),
                 keras.callbacks.ModelCheckpoint(filepath=str(tmp_path / "best.weights.h5"), save_best_only=True,
                                                 save_weights_only=True, monitor="val_loss")]
    history = model.fit(train_dataset, epochs=8, validation_data=val_dataset, callbacks=callbacks, verbose=0)
    epochs = len(history.history["loss"])
    assert epochs < 8 or history.history["val_loss"][-1] < history.history["val_loss"][-2] - 1e-2
    best = get_compiled_model()
    best.load_weights(str(tmp_path / "best.weights.h5"))
    best_loss = best.evaluate(val_dataset, verbose=0)[0]
    assert best_loss == pytest.approx(min(history.history["val_loss"]), rel=1e-5)


def test_class_and_sample_weights(mnist):
    (x_train, y_train), _ = mnist
    class_weight = {c: 1.0 for c in range(10)}
    class_weight[5] = 2.0                           # "set weight '2' for class '5', making it twice as important"
    model = get_compiled_model()
    by_class = model.fit(x_train, y_train, class_weight=class_weight, batch_size=64, epochs=1, shuffle=False,
                         verbose=0)
    sample_weight = np.ones(shape=(len(y_train),))
    sample_weight[y_train == 5] = 2.0
    model = get_compiled_model()
    by_sample = model.fit(x_train, y_train, sample_weight=sample_weight, batch_size=64, epochs=1, shuffle=False,
                          verbose=0)
    np.testing.assert_allclose(by_class.history["loss"], by_sample.history["loss"], rtol=1e-6)


def test_a_model_with_two_inputs_and_two_outputs():
    image_input = flow.Input(shape=(32, 32, 3), name="img_input")
    timeseries_input = flow.Input(shape=(20, 10), name="ts_input")
    x1 = flow.layers.Conv2D(3, 3)(image_input)
    x1 = flow.layers.GlobalMaxPooling2D()(x1)
    x2 = flow.layers.Conv1D(3, 3)(timeseries_input)
    x2 = flow.layers.GlobalAveragePooling2D()(flow.layers.Reshape((18, 1, 3))(x2))
    x = flow.layers.concatenate([x1, x2])
    score_output = flow.layers.Dense(1, name="score_output")(x)
    class_output = flow.layers.Dense(5, name="class_output")(x)
    model = flow.Model(inputs=[image_input, timeseries_input], outputs=[score_output, class_output])
    model.compile(optimizer=flow.optimizers.RMSprop(1e-3),
                  loss={"score_output": flow.losses.MeanSquaredError(),
                        "class_output": flow.losses.CategoricalCrossentropy(from_logits=True)},
                  loss_weights={"score_output": 2.0, "class_output": 1.0})
    rng = np.random.default_rng(0)
    img_data, ts_data = rng.random((100, 32, 32, 3)), rng.random((100, 20, 10))
    score_targets, class_targets = rng.random((100, 1)), rng.random((100, 5))
    history = model.fit({"img_input": img_data, "ts_input": ts_data},
                        {"score_output": score_targets, "class_output": class_targets}, batch_size=32, epochs=3,
                        verbose=0)
    assert sorted(history.history) == ["class_output_loss", "loss", "score_output_loss"]
    assert history.history["loss"][-1] < history.history["loss"][0]


@pytest.mark.filterwarnings("ignore::UserWarning")
def test_the_functional_api_guide_saves_and_reloads_the_model(mnist, tmp_path, monkeypatch):
    """The Functional API guide's first model: trained with validation_split, saved with model.save, deleted,
    and reloaded with load_model; the reloaded model evaluates and predicts as the one that was saved."""
    monkeypatch.chdir(tmp_path)
    (x_train, y_train), (x_test, y_test) = mnist
    inputs = flow.Input(shape=(784,))
    x = flow.layers.Dense(64, activation="relu")(inputs)
    x = flow.layers.Dense(64, activation="relu")(x)
    outputs = flow.layers.Dense(10)(x)
    model = flow.Model(inputs=inputs, outputs=outputs, name="mnist_model")
    model.compile(loss=flow.losses.SparseCategoricalCrossentropy(from_logits=True),
                  optimizer=flow.optimizers.RMSprop(), metrics=["accuracy"])
    history = model.fit(x_train, y_train, batch_size=64, epochs=2, validation_split=0.2, verbose=0)
    assert sorted(history.history) == ["accuracy", "loss", "val_accuracy", "val_loss"]
    test_scores = model.evaluate(x_test, y_test, verbose=0)
    assert test_scores[1] > 0.8
    predictions = model.predict(x_test, verbose=0)
    model.save("my_model.keras")
    del model
    model = flow.models.load_model("my_model.keras")
    assert model.name == "mnist_model" and model.metrics_names == ["loss", "accuracy"]
    assert model.evaluate(x_test, y_test, verbose=0) == test_scores
    np.testing.assert_array_equal(model.predict(x_test, verbose=0), predictions)
