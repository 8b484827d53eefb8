"""keras.io, "The Model class" of "Making new layers and models via subclassing", on MNIST digits: a
``keras.Model`` subclass whose ``__init__`` makes its layers and whose ``call(inputs, training=None)`` wires them,
built by its first call; a custom layer of its own inside; trained with ``fit`` and accuracy."""
import numpy as np

import flowlayers as keras
from flowlayers import layers, ops


class Standardize(layers.Layer):
    """Each image to zero mean and unit variance, computed with ``ops`` on the inputs."""

    def call(self, x):
        mean = ops.mean(x, axis=-1, keepdims=True)
        std = ops.sqrt(ops.var(x, axis=-1, keepdims=True) + 1e-6)
        return (x - mean) / std


class DigitClassifier(keras.Model):
    def __init__(self, hidden=64, num_classes=10, **kwargs):
        super().__init__(**kwargs)
        self.flatten = layers.Flatten()
        self.standardize = Standardize()
        self.hidden = layers.Dense(hidden, activation="relu")
        self.logits = layers.Dense(num_classes)

    def call(self, inputs, training=None):
        x = self.standardize(self.flatten(inputs))
        return self.logits(self.hidden(x))


def get_data(mnist):
    (x_train, y_train), _ = mnist
    x = x_train[:256].astype("float32") / 255.0
    return {"x": x, "y": y_train[:256], "x_test": x_train[256:384].astype("float32") / 255.0}


def make_model():
    model = DigitClassifier()
    model.compile(optimizer=keras.optimizers.Adam(1e-3),
                  loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
                  metrics=["accuracy"])
    return model


def train(model, data):
    return model.fit(data["x"], data["y"], batch_size=64, epochs=2, shuffle=False, verbose=0)
