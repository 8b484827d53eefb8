"""LeNet trained on 4 logical CPU devices (argv: backend, view), nothing read on the host between steps once a
first fit has compiled the step (the jax backend dispatches ahead): it must finish.  Run by
tests/test_jax_backend.py in its own process, since a deadlock in XLA:CPU's collectives aborts the process."""
import os
import sys

os.environ["FLOWLAYERS_CPU_DEVICES"] = "4"

import numpy as np  # noqa: E402

import flowlayers as flow  # noqa: E402

flow.config.set_backend(sys.argv[1])
flow.config.set_view(sys.argv[2])
flow.config.gpu_device_num(4)
rng = np.random.default_rng(0)
x = rng.random((2000, 28, 28, 1), dtype=np.float32)
y = rng.integers(0, 10, 2000).astype(np.int32)
inputs = flow.Input((28, 28, 1))
h = flow.layers.Conv2D(32, 5, padding="same", activation="relu")(inputs)
h = flow.layers.MaxPool2D(2, 2, padding="same")(h)
h = flow.layers.Conv2D(64, 5, padding="same", activation="relu")(h)
h = flow.layers.MaxPool2D(2, 2, padding="same")(h)
h = flow.layers.Dense(512, activation="relu")(flow.layers.Flatten()(h))
model = flow.Model(inputs, flow.layers.Dense(10)(h))
model.compile(flow.optimizers.SGD(0.05, momentum=0.9), flow.losses.SparseCategoricalCrossentropy(from_logits=True))
model.fit(x[:200], y[:200], batch_size=100, epochs=1, verbose=0)       # compiled here: the steps below queue up
for _ in range(3):
    history = model.fit(x, y, batch_size=100, epochs=1, verbose=0, shuffle=False)
print(f"trained 62 steps, loss {history.history['loss'][0]:.4f}")
