"""keras.io, "Timeseries classification from scratch": the fully convolutional network (three ``Conv1D`` +
``BatchNormalization`` + ``ReLU`` blocks, ``GlobalAveragePooling1D``, a softmax head) compiled with
``sparse_categorical_accuracy`` and trained with ``validation_split``.  FordA is a download: the series here are
noisy waves, of one period for class 0 and another for class 1."""
import numpy as np

import flowlayers as keras

num_classes = 2


def make_series(rng, n, length=64):
    label = rng.integers(0, 2, n)
    t = np.arange(length)
    period = np.where(label[:, None] == 0, 16.0, 10.0)
    phase = rng.uniform(0, 2 * np.pi, (n, 1))
    x = np.sin(2 * np.pi * t / period + phase) + 0.3 * rng.normal(size=(n, length))
    return x.reshape((n, length, 1)).astype("float32"), label


def get_data(mnist):
    rng = np.random.default_rng(0)
    x_train, y_train = make_series(rng, 160)
    x_test, _ = make_series(rng, 64)
    return {"x": x_train, "y": y_train, "x_test": x_test}


def make_model(input_shape=(64, 1)):
    input_layer = keras.layers.Input(input_shape)

    conv1 = keras.layers.Conv1D(filters=16, kernel_size=3, padding="same")(input_layer)
    conv1 = keras.layers.BatchNormalization()(conv1)
    conv1 = keras.layers.ReLU()(conv1)

    conv2 = keras.layers.Conv1D(filters=16, kernel_size=3, padding="same")(conv1)
    conv2 = keras.layers.BatchNormalization()(conv2)
    conv2 = keras.layers.ReLU()(conv2)

    conv3 = keras.layers.Conv1D(filters=16, kernel_size=3, padding="same")(conv2)
    conv3 = keras.layers.BatchNormalization()(conv3)
    conv3 = keras.layers.ReLU()(conv3)

    gap = keras.layers.GlobalAveragePooling1D()(conv3)

    output_layer = keras.layers.Dense(num_classes, activation="softmax")(gap)

    model = keras.models.Model(inputs=input_layer, outputs=output_layer)
    model.compile(optimizer="adam", loss="sparse_categorical_crossentropy",
                  metrics=["sparse_categorical_accuracy"])
    return model


def train(model, data):
    return model.fit(data["x"], data["y"], batch_size=32, epochs=2, validation_split=0.2, shuffle=False,
                     verbose=0)
