"""keras.io, "Making new layers and models via subclassing": the ``Linear`` layer holding its weights with
``add_weight`` and using them directly, layers nested in an ``MLPBlock``, and a residual block whose ``call`` uses
``ops``; trained with Adam on a regression."""
import numpy as np

import flowlayers as keras
from flowlayers import layers, ops


class Linear(keras.layers.Layer):
    def __init__(self, units=32):
        super().__init__()
        self.units = units

    def build(self, input_shape):
        self.w = self.add_weight(shape=(input_shape[-1], self.units), initializer="random_normal",
                                 trainable=True)
        self.b = self.add_weight(shape=(self.units,), initializer="random_normal", trainable=True)

    def call(self, inputs):
        return ops.matmul(inputs, self.w) + self.b


class ResidualBlock(layers.Layer):
    """x + f(x), f a two-layer perceptron, scaled by a learned gain."""

    def __init__(self, units, **kwargs):
        super().__init__(**kwargs)
        self.inner = Linear(units)
        self.outer = Linear(units)

    def build(self, input_shape):
        self.gain = self.add_weight(shape=(), initializer="ones", name="gain")

    def call(self, x):
        h = ops.gelu(self.inner(x))
        return ops.add(x, self.gain * self.outer(h))


class MLPBlock(keras.layers.Layer):
    def __init__(self):
        super().__init__()
        self.linear_1 = Linear(32)
        self.residual = ResidualBlock(32)
        self.linear_3 = Linear(1)

    def call(self, inputs):
        x = self.linear_1(inputs)
        x = ops.relu(x)
        x = self.residual(x)
        return self.linear_3(x)


def get_data(mnist):
    rng = np.random.default_rng(0)
    x = rng.normal(size=(128, 8)).astype("float32")
    y = (np.sin(x[:, :1]) + 0.5 * x[:, 1:2] * x[:, 2:3]).astype("float32")
    return {"x": x, "y": y}


def make_model():
    inputs = keras.Input(shape=(8,))
    outputs = MLPBlock()(inputs)
    model = keras.Model(inputs, outputs)
    model.compile(optimizer=keras.optimizers.Adam(learning_rate=1e-2), loss="mean_squared_error")
    return model


def train(model, data):
    return model.fit(data["x"], data["y"], batch_size=32, epochs=3, shuffle=False, verbose=0)
