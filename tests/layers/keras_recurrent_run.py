"""Keras 3 on JAX trains one model of ``test_recurrent_training.py`` in a process of its own (JAX's dense Adam:
Keras on TensorFlow updates an embedding from its sparse gradient rows with a second moment of each row's
occurrences apart, another optimizer), from the weights and data a test gives, and writes its test accuracy.
    python keras_recurrent_run.py IN.npz OUT.json"""
import json
import os
import sys

os.environ["KERAS_BACKEND"] = "jax"
import keras  # noqa: E402
import numpy as np  # noqa: E402

import test_recurrent_training as case  # noqa: E402


def main(given, out):
    data = np.load(given)
    model = getattr(case, str(data["make"]))(keras)
    model.set_weights([data[f"w{i}"] for i in range(int(data["weights"]))])
    model.compile(keras.optimizers.Adam(float(data["learning_rate"])), "binary_crossentropy")
    model.fit(data["x"], data["y"], batch_size=case.BATCH, epochs=case.EPOCHS, shuffle=False, verbose=0)
    accuracy = float(np.mean((model.predict(data["x_test"], verbose=0) > 0.5) == (data["y_test"] > 0.5)))
    with open(out, "w") as f:
        json.dump({"accuracy": accuracy, "backend": keras.backend.backend()}, f)


if __name__ == "__main__":
    main(*sys.argv[1:3])
