"""LeNet trained on 4 logical CPU devices (argv: backend, view), nothing read on the host between steps once a
first fit has compiled the step (the jax backend dispatches ahead): it must finish.  Run by
tests/test_jax_backend.py in its own process, since a deadlock in XLA:CPU's collectives aborts the process."""
import sys

from cpu_lenet import lenet

model, x, y = lenet(sys.argv[1], sys.argv[2], 2000)
model.fit(x[:200], y[:200], batch_size=100, epochs=1, verbose=0)       # compiled here: the steps below queue up
for _ in range(3):
    history = model.fit(x, y, batch_size=100, epochs=1, verbose=0, shuffle=False)
print(f"trained 62 steps, loss {history.history['loss'][0]:.4f}")
