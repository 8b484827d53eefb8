"""keras.io, "Imbalanced classification: credit card fraud detection": a dense classifier of a rare class, with
the confusion metrics keras.io compiles it with (``FalseNegatives``, ``FalsePositives``, ``TrueNegatives``,
``TruePositives``, ``Precision``, ``Recall``) and an ``AUC``, trained with ``class_weight`` from the class counts
and validated on held-out rows.  The transactions are made up (the Kaggle set is a download): about 1 in 12 is a
fraud, drawn from a shifted distribution."""
import numpy as np

import flowlayers as keras


def get_data(mnist):
    rng = np.random.default_rng(0)
    n = 384
    targets = (rng.uniform(size=(n, 1)) < 0.08).astype("float32")
    features = rng.normal(size=(n, 12)) + 0.8 * targets * rng.normal(1.0, 0.5, size=(1, 12))
    features = features.astype("float32")
    num_val_samples = 128
    train_features, train_targets = features[:-num_val_samples], targets[:-num_val_samples]
    val_features, val_targets = features[-num_val_samples:], targets[-num_val_samples:]
    mean, std = np.mean(train_features, axis=0), np.std(train_features, axis=0)
    train_features = (train_features - mean) / std
    val_features = (val_features - mean) / std
    counts = np.bincount(train_targets[:, 0].astype("int64"))
    return {"x": train_features, "y": train_targets, "x_test": val_features, "y_test": val_targets,
            "class_weight": {0: 1.0 / counts[0], 1: 1.0 / counts[1]}}


def make_model():
    model = keras.Sequential(
        [
            keras.Input(shape=(12,)),
            keras.layers.Dense(64, activation="relu"),
            keras.layers.Dense(64, activation="relu"),
            keras.layers.Dense(1, activation="sigmoid"),
        ]
    )
    metrics = [
        keras.metrics.FalseNegatives(name="fn"),
        keras.metrics.FalsePositives(name="fp"),
        keras.metrics.TrueNegatives(name="tn"),
        keras.metrics.TruePositives(name="tp"),
        keras.metrics.Precision(name="precision"),
        keras.metrics.Recall(name="recall"),
        keras.metrics.AUC(name="auc"),
    ]
    model.compile(optimizer=keras.optimizers.Adam(1e-2), loss="binary_crossentropy", metrics=metrics)
    return model


def train(model, data):
    return model.fit(data["x"], data["y"], batch_size=64, epochs=3, verbose=0, shuffle=False,
                     validation_data=(data["x_test"], data["y_test"]), class_weight=data["class_weight"])
