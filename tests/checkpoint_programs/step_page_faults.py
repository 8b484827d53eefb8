"""LeNet trained on 4 logical CPU devices with the jax backend (argv: view): the page faults of this process per
step, once a first fit has compiled the step, and whether glibc took the host-heap settings.  Run by
tests/test_jax_backend.py in its own process: the settings hold for a whole process, from its first step on."""
import os
import sys

os.environ["FLOWLAYERS_CPU_DEVICES"] = "4"

import numpy as np  # noqa: E402

import flowlayers as flow  # noqa: E402


def minor_faults():
    with open("/proc/self/stat") as f:
        return int(f.read().rsplit(")", 1)[1].split()[7])


flow.config.set_backend("jax")
flow.config.set_view(sys.argv[1])
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
for _ in range(2):     # compiles; the heaps grow
    model.fit(x[:500], y[:500], batch_size=100, epochs=1, verbose=0)
before = minor_faults()
history = model.fit(x, y, batch_size=100, epochs=1, verbose=0, shuffle=False)
per_step = (minor_faults() - before) / 20

from flowlayers_jax import host_heap  # noqa: E402

print(f"page faults per step {per_step:.0f}, kept {host_heap.keep()}, loss {history.history['loss'][0]:.4f}")
