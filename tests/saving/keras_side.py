"""Keras 3 in its own process (the test sets ``KERAS_BACKEND``): it writes the Keras files of a model, or opens the
files flowlayers wrote; its numbers go back in an ``.npz``.

    python keras_side.py write <model> <dir>            <dir>/keras.keras, keras.weights.h5, keras.h5 and keras.npz
                                                        (predictions "pred", optimizer variables "opt_<i>")
    python keras_side.py open <model> <out.npz> <file>...   per file i: "pred_<i>", "opt_<i>_<j>"
"""
import os
import sys
import warnings

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import keras  # noqa: E402
import numpy as np  # noqa: E402

from keras_file_models import MODELS, compile_and_fit, data  # noqa: E402


def optimizer_arrays(model):
    return [keras.ops.convert_to_numpy(v) for v in model.optimizer.variables]


def write(name, folder):
    keras.utils.set_random_seed(0)
    model = compile_and_fit(keras, MODELS[name](keras), name)
    model.save(os.path.join(folder, "keras.keras"))
    model.save_weights(os.path.join(folder, "keras.weights.h5"))
    model.save(os.path.join(folder, "keras.h5"))
    arrays = {"pred": model.predict(data(name)[0], verbose=0)}
    arrays.update({f"opt_{j}": v for j, v in enumerate(optimizer_arrays(model))})
    np.savez(os.path.join(folder, "keras.npz"), **arrays)


def open_files(name, out, files):
    arrays = {}
    for i, path in enumerate(files):
        with warnings.catch_warnings():
            warnings.simplefilter("error", UserWarning)     # a skipped optimizer state fails the test
            if path.endswith(".weights.h5"):
                model = MODELS[name](keras)
                model.compile(keras.optimizers.Adam(0.01),
                              keras.losses.SparseCategoricalCrossentropy(from_logits=name != "conv"))
                model.optimizer.build(model.trainable_variables)
                model.load_weights(path)
            else:
                model = keras.models.load_model(path)
        arrays[f"pred_{i}"] = model.predict(data(name)[0], verbose=0)
        arrays.update({f"opt_{i}_{j}": v for j, v in enumerate(optimizer_arrays(model))})
    np.savez(out, **arrays)


if __name__ == "__main__":
    if sys.argv[1] == "write":
        write(sys.argv[2], sys.argv[3])
    else:
        open_files(sys.argv[2], sys.argv[3], sys.argv[4:])
