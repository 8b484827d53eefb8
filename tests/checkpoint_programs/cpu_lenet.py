"""The LeNet the subprocess programs of tests/test_jax_backend.py train on 4 logical CPU devices, and its data
(random images, 10 classes).  Imported before anything else: it sets the device count before flowlayers starts."""
import os

os.environ["FLOWLAYERS_CPU_DEVICES"] = "4"

import numpy as np  # noqa: E402

import flowlayers as flow  # noqa: E402


def lenet(backend, view, samples):
    """(model compiled with SGD and momentum, images, labels) on 4 devices of ``backend`` in ``view``."""
    flow.config.set_backend(backend)
    flow.config.set_view(view)
    flow.config.gpu_device_num(4)
    rng = np.random.default_rng(0)
    x = rng.random((samples, 28, 28, 1), dtype=np.float32)
    y = rng.integers(0, 10, samples).astype(np.int32)
    inputs = flow.Input((28, 28, 1))
    h = flow.layers.Conv2D(32, 5, padding="same", activation="relu")(inputs)
    h = flow.layers.MaxPool2D(2, 2, padding="same")(h)
    h = flow.layers.Conv2D(64, 5, padding="same", activation="relu")(h)
    h = flow.layers.MaxPool2D(2, 2, padding="same")(h)
    h = flow.layers.Dense(512, activation="relu")(flow.layers.Flatten()(h))
    model = flow.Model(inputs, flow.layers.Dense(10)(h))
    model.compile(flow.optimizers.SGD(0.05, momentum=0.9),
                  flow.losses.SparseCategoricalCrossentropy(from_logits=True))
    return model, x, y
