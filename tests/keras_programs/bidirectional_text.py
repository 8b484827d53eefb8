"""keras.io, "Bidirectional LSTM on IMDB": an integer ``Input`` of free length, an ``Embedding``, a
``Bidirectional(LSTM(return_sequences=True))`` under a ``Bidirectional(GRU)``, and a sigmoid head trained with
``binary_crossentropy`` and accuracy.  The reviews are made up (IMDB is a download): positive when token 3 comes
before token 4 in them, which a reader of both directions learns."""
import numpy as np

import flowlayers as keras
from flowlayers import layers

max_features = 20
maxlen = 12


def get_data(mnist):
    rng = np.random.default_rng(0)
    x = rng.integers(5, max_features, size=(160, maxlen))
    first, second = rng.integers(0, maxlen, 160), rng.integers(0, maxlen, 160)
    x[np.arange(160), first] = 3
    x[np.arange(160), np.where(second == first, (first + 1) % maxlen, second)] = 4
    y = (np.argmax(x == 3, axis=1) < np.argmax(x == 4, axis=1)).astype("float32")
    return {"x": x[:128], "y": y[:128], "x_test": x[128:]}


def make_model():
    inputs = keras.Input(shape=(None,), dtype="int32")
    x = layers.Embedding(max_features, 8)(inputs)
    x = layers.Bidirectional(layers.LSTM(8, return_sequences=True))(x)
    x = layers.Bidirectional(layers.GRU(8))(x)
    outputs = layers.Dense(1, activation="sigmoid")(x)
    model = keras.Model(inputs, outputs)
    model.compile(optimizer="adam", loss="binary_crossentropy", metrics=["accuracy"])
    return model


def train(model, data):
    return model.fit(data["x"], data["y"], batch_size=32, epochs=2, shuffle=False, verbose=0)
