"""keras.io, "Simple MNIST convnet", on the real MNIST test set (the first 320 digits to train, the next 128 held
out): ``Conv2D``, ``MaxPooling2D``, ``Flatten`` and a softmax head, trained with ``categorical_crossentropy`` on
``keras.utils.to_categorical``-style labels (one-hot with numpy here) and ``validation_split``."""
import numpy as np

import flowlayers as keras
from flowlayers import layers

num_classes = 10
input_shape = (28, 28, 1)
# keras.io drops 0.5 before the head; off here, so that each step is the same math as Keras' (masks differ)
dropout = 0.0


def get_data(mnist):
    (x_train, y_train), _ = mnist
    x_train = x_train.astype("float32") / 255
    x_train = np.expand_dims(x_train, -1)
    y_train = np.eye(num_classes, dtype="float32")[y_train]
    return {"x": x_train[:320], "y": y_train[:320], "x_test": x_train[320:448]}


def make_model():
    model = keras.Sequential(
        [
            keras.Input(shape=input_shape),
            layers.Conv2D(8, kernel_size=(3, 3), activation="relu"),
            layers.MaxPooling2D(pool_size=(2, 2)),
            layers.Conv2D(16, kernel_size=(3, 3), activation="relu"),
            layers.MaxPooling2D(pool_size=(2, 2)),
            layers.Flatten(),
            layers.Dropout(dropout),
            layers.Dense(num_classes, activation="softmax"),
        ]
    )
    model.compile(loss="categorical_crossentropy", optimizer="adam", metrics=["accuracy"])
    return model


def train(model, data):
    return model.fit(data["x"], data["y"], batch_size=64, epochs=2, validation_split=0.2, shuffle=False,
                     verbose=0)
