"""keras.io, "The Functional API", its model with multiple inputs and outputs: issue tickets ranked by priority
and routed to departments from their title (text), body (text) and tags (binary).  Named ``Input``s, an
``Embedding`` shared by neither, two ``LSTM``s, ``concatenate``, two named heads, and ``compile`` with a loss and
a loss weight per output; ``fit`` takes dicts keyed by the inputs' and outputs' names."""
import numpy as np

import flowlayers as keras
from flowlayers import layers

num_tags = 12
num_words = 50
num_departments = 4


def get_data(mnist):
    rng = np.random.default_rng(0)
    n = 96
    title_data = rng.integers(0, num_words, size=(n, 8))
    body_data = rng.integers(0, num_words, size=(n, 20))
    tags_data = rng.integers(0, 2, size=(n, num_tags)).astype("float32")
    priority_targets = rng.random(size=(n, 1)).astype("float32")
    # keras.io draws several departments per ticket (multi-hot); one each here: TensorFlow's softmax cross-entropy
    # kernel takes the gradient as softmax - y, true only where the labels sum to one, so on multi-hot targets the
    # engines' steps differ (JAX differentiates the formula)
    dept_targets = np.eye(num_departments, dtype="float32")[rng.integers(0, num_departments, size=n)]
    x = {"title": title_data, "body": body_data, "tags": tags_data}
    return {"x": x, "y": {"priority": priority_targets, "department": dept_targets}}


def make_model():
    title_input = keras.Input(shape=(None,), name="title")
    body_input = keras.Input(shape=(None,), name="body")
    tags_input = keras.Input(shape=(num_tags,), name="tags")

    title_features = layers.Embedding(num_words, 16)(title_input)
    body_features = layers.Embedding(num_words, 8)(body_input)
    title_features = layers.LSTM(16)(title_features)
    body_features = layers.LSTM(8)(body_features)

    x = layers.concatenate([title_features, body_features, tags_input])
    priority_pred = layers.Dense(1, name="priority")(x)
    department_pred = layers.Dense(num_departments, name="department")(x)

    model = keras.Model(
        inputs=[title_input, body_input, tags_input],
        outputs={"priority": priority_pred, "department": department_pred},
    )
    model.compile(
        optimizer=keras.optimizers.RMSprop(1e-3),
        loss={
            "priority": keras.losses.BinaryCrossentropy(from_logits=True),
            "department": keras.losses.CategoricalCrossentropy(from_logits=True),
        },
        loss_weights={"priority": 1.0, "department": 0.2},
    )
    return model


def train(model, data):
    return model.fit(data["x"], data["y"], epochs=2, batch_size=32, shuffle=False, verbose=0)
