"""A convolutional classifier with ``BatchNormalization`` after each convolution and ``Dropout`` before its head,
as keras.io's image classifiers build them, on MNIST digits: each training step normalises by the batch and drops
at random; prediction uses the moving statistics and drops nothing."""
import numpy as np

import flowlayers as keras
from flowlayers import layers


def get_data(mnist):
    (x_train, y_train), _ = mnist
    x = x_train[:256, ::2, ::2, None].astype("float32") / 255
    return {"x": x, "y": y_train[:256], "x_test": x_train[256:384, ::2, ::2, None].astype("float32") / 255}


def make_model():
    inputs = keras.Input(shape=(14, 14, 1))
    x = layers.Conv2D(8, 3, padding="same", use_bias=False)(inputs)
    x = layers.BatchNormalization()(x)
    x = layers.Activation("relu")(x)
    x = layers.Conv2D(16, 3, strides=2, padding="same", use_bias=False)(x)
    x = layers.BatchNormalization(momentum=0.9)(x)
    x = layers.Activation("relu")(x)
    x = layers.GlobalAveragePooling2D()(x)
    x = layers.Dropout(0.25)(x)
    outputs = layers.Dense(10, activation="softmax")(x)
    model = keras.Model(inputs, outputs)
    model.compile(optimizer=keras.optimizers.Adam(1e-2), loss="sparse_categorical_crossentropy",
                  metrics=["accuracy"])
    return model


def train(model, data):
    return model.fit(data["x"], data["y"], batch_size=64, epochs=2, shuffle=False, verbose=0)
