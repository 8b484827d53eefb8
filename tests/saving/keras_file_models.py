"""The models of the Keras-file tests, written once for both APIs (``api`` is ``flowlayers`` or ``keras``): a conv
net, a transformer classifier and an LSTM, with their data, the places flowlayers runs them in and the layout
rules of the 2x2 mesh.  Imported by the tests and by ``keras_side.py`` (Keras in its own process)."""
import numpy as np

ROWS = 16


def conv(api):
    L = api.layers
    x = api.Input((8, 8, 1))
    h = L.Conv2D(4, 3, activation="relu")(x)
    h = L.BatchNormalization()(h)
    h = L.MaxPooling2D()(h)
    h = L.Dropout(0.5)(L.Flatten()(h))
    return api.Model(x, L.Dense(10, activation="softmax")(h))


def transformer(api):
    L = api.layers
    x = api.Input((6,), dtype="int32")
    e = L.Embedding(20, 8)(x)
    h = L.LayerNormalization()(e + L.MultiHeadAttention(num_heads=2, key_dim=4)(e, e))
    h = L.GlobalAveragePooling1D()(h)
    return api.Model(x, L.Dense(3)(L.Dense(16, activation="relu")(h)))


def lstm(api):
    L = api.layers
    x = api.Input((5, 3))
    return api.Model(x, L.Dense(2)(L.LSTM(4)(x)))


MODELS = {"conv": conv, "transformer": transformer, "lstm": lstm}
CLASSES = {"conv": 10, "transformer": 3, "lstm": 2}


def data(name, seed=0):
    """(x, y) for model ``name``: ROWS examples."""
    rng = np.random.default_rng(seed)
    x = {"conv": lambda: rng.normal(size=(ROWS, 8, 8, 1)).astype(np.float32),
         "transformer": lambda: rng.integers(0, 20, (ROWS, 6)).astype(np.int32),
         "lstm": lambda: rng.normal(size=(ROWS, 5, 3)).astype(np.float32)}[name]()
    return x, (np.arange(ROWS) % CLASSES[name]).astype(np.int32)


def compile_and_fit(api, model, name):
    """Adam on the sparse cross-entropy (of probabilities for the conv net, of logits for the others), two steps of
    8 rows: the optimizer has state to save."""
    model.compile(api.optimizers.Adam(0.01), api.losses.SparseCategoricalCrossentropy(from_logits=name != "conv"),
                  metrics=["accuracy"])
    x, y = data(name)
    model.fit(x, y, batch_size=8, epochs=1, shuffle=False, verbose=0)
    return model
