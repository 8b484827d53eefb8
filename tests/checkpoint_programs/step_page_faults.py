"""LeNet trained on 4 logical CPU devices with the jax backend (argv: view): the page faults of this process per
step, once a first fit has compiled the step, and whether glibc took the host-heap settings.  Run by
tests/test_jax_backend.py in its own process: the settings hold for a whole process, from its first step on."""
import sys

from cpu_lenet import lenet


def minor_faults():
    with open("/proc/self/stat") as f:
        return int(f.read().rsplit(")", 1)[1].split()[7])


model, x, y = lenet("jax", sys.argv[1], 2000)
for _ in range(2):     # compiles; the heaps grow
    model.fit(x[:500], y[:500], batch_size=100, epochs=1, verbose=0)
before = minor_faults()
history = model.fit(x, y, batch_size=100, epochs=1, verbose=0, shuffle=False)
per_step = (minor_faults() - before) / 20

from flowlayers_jax import host_heap  # noqa: E402

print(f"page faults per step {per_step:.0f}, kept {host_heap.keep()}, loss {history.history['loss'][0]:.4f}")
