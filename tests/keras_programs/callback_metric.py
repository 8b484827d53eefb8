"""A callback that computes a metric on its own, as keras.io's "Writing your own callbacks" and its examples do:
``on_epoch_end`` predicts held-out data with ``self.model.predict``, computes a ROC AUC with numpy and puts it in
``logs`` (so ``History`` keeps it); ``on_train_batch_end`` records each batch's loss.  The model is a small MLP on
made-up two-class data."""
import numpy as np

import flowlayers as keras
from flowlayers import layers


def roc_auc(labels, scores):
    """The probability that a positive scores above a negative (ties count half)."""
    pos, neg = scores[labels == 1], scores[labels == 0]
    greater = (pos[:, None] > neg[None, :]).sum() + 0.5 * (pos[:, None] == neg[None, :]).sum()
    return float(greater / (len(pos) * len(neg)))


class HeldOutAUC(keras.callbacks.Callback):
    def __init__(self, x_val, y_val):
        super().__init__()
        self.x_val, self.y_val = x_val, y_val
        self.batch_losses = []

    def on_train_batch_end(self, batch, logs=None):
        self.batch_losses.append(logs["loss"])

    def on_epoch_end(self, epoch, logs=None):
        scores = self.model.predict(self.x_val, verbose=0)[:, 0]
        logs["val_roc_auc"] = roc_auc(self.y_val[:, 0], scores)


def get_data(mnist):
    rng = np.random.default_rng(1)
    x = rng.normal(size=(256, 6)).astype("float32")
    y = ((x[:, 0] * x[:, 1] + 0.5 * x[:, 2] + 0.3 * rng.normal(size=256)) > 0).astype("float32")[:, None]
    return {"x": x[:192], "y": y[:192], "x_test": x[192:], "y_test": y[192:]}


def make_model():
    inputs = keras.Input(shape=(6,))
    x = layers.Dense(32, activation="tanh")(inputs)
    x = layers.Dense(16, activation="relu")(x)
    outputs = layers.Dense(1, activation="sigmoid")(x)
    model = keras.Model(inputs, outputs)
    model.compile(optimizer=keras.optimizers.RMSprop(learning_rate=3e-3), loss="binary_crossentropy")
    return model


def train(model, data):
    model.held_out_auc = HeldOutAUC(data["x_test"], data["y_test"])
    return model.fit(data["x"], data["y"], batch_size=48, epochs=3, shuffle=False, verbose=0,
                     callbacks=[model.held_out_auc])


def check(model, data, history):
    """The callback saw every batch, and its metric is the one numpy computes from the trained model."""
    assert len(model.held_out_auc.batch_losses) == 3 * 4
    scores = model.predict(data["x_test"], verbose=0)[:, 0]
    assert history.history["val_roc_auc"][-1] == roc_auc(data["y_test"][:, 0], scores)
    assert history.history["val_roc_auc"][-1] > 0.7
