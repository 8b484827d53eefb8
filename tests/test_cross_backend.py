"""The two engines against each other: the same model trained from the same start on the tensorflow and the jax
backend ends within 1e-4; a checkpoint written by either loads in the other, in any view and mesh, bit for bit, and
predicts within 1e-5; a model moves between engines when the backend is switched; backend_name says which runs."""
import importlib.util
import subprocess
import sys

import numpy as np
import pytest

import flowlayers as flow
from places import consistent, use

pytestmark = pytest.mark.skipif(
    not all(importlib.util.find_spec(m) for m in ("tensorflow", "jax")) or
    not {"tensorflow", "jax"} <= set(flow.engine.available()), reason="needs both the tensorflow and the jax backend")

RNG = np.random.default_rng(7)
X = RNG.normal(size=(64, 1, 8, 8)).astype(np.float32)
Y = RNG.integers(0, 5, 64)

PLACES = [("consistent", 1, {}, {}), ("consistent", 2, {"data": 2}, {}),
          ("consistent", 4, {"data": 2, "model": 2}, {r"dense/kernel": (None, "model")}), ("mirrored", 2, {}, {}),
          ("mirrored", 4, {}, {})]


def place(backend, where):
    view, n, mesh, rules = where
    flow.config.set_backend(backend)
    use(view, n, mesh, rules, seed=0, fresh=True)


def build():
    x = flow.Input((1, 8, 8))
    h = flow.layers.Conv2D(4, 3, padding="same", activation="relu", data_format="channels_first", name="conv")(x)
    h = flow.layers.BatchNormalization(axis=1, name="bn")(h)
    h = flow.layers.MaxPool2D(2, data_format="channels_first", name="pool")(h)
    h = flow.layers.Flatten(name="flat")(h)
    h = flow.layers.Dense(16, activation="tanh", name="dense")(h)
    model = flow.Model(x, flow.layers.Dense(5, name="logits")(h))
    model.compile(flow.optimizers.Adam(0.01), flow.losses.SparseCategoricalCrossentropy(from_logits=True),
                  metrics=["accuracy"])
    return model


@pytest.fixture(autouse=True)
def _jax_has_the_devices():
    """JAX gives this process the 4 devices the places need, or the test is skipped saying why: JAX was started
    with fewer by code outside flowlayers (a test using JAX directly in this process), which no test here can undo."""
    try:
        flow.engine.backend("jax").check_device_count(4, "tests/test_cross_backend.py's places")
    except flow.ConfigError as e:
        pytest.skip(str(e))


@pytest.fixture(autouse=True)
def _back_to_the_suites_backend():
    yield
    flow.config.set_backend(None)       # the default again: $FLOWLAYERS_BACKEND, which later tests may change


def start():
    flow.config.set_backend("tensorflow")
    consistent(1)
    return build().get_weights()


@pytest.mark.parametrize("where", PLACES[:2] + PLACES[3:4], ids=lambda w: f"{w[0]}{w[1]}")
def test_ten_steps_on_either_engine_end_within_1e_4(where):
    weights = start()
    ends = {}
    for backend in ("tensorflow", "jax"):
        place(backend, where)
        model = build()
        model.set_weights(weights)
        model.fit(X, Y, batch_size=32, epochs=5, shuffle=False, verbose=0)       # 10 steps
        assert model.optimizer.iterations == 10
        ends[backend] = model.get_weights()
    for a, b in zip(ends["tensorflow"], ends["jax"]):
        np.testing.assert_allclose(a, b, atol=1e-4)
    assert max(np.abs(a - w).max() for a, w in zip(ends["jax"], weights)) > 1e-2      # it trained


@pytest.mark.parametrize("writer, reader", [("tensorflow", "jax"), ("jax", "tensorflow")])
def test_a_checkpoint_of_either_engine_loads_in_the_other_anywhere(tmp_path, writer, reader):
    weights = start()
    place(writer, PLACES[2])            # written from a data x model mesh, the dense kernel split
    model = build()
    model.set_weights(weights)
    model.fit(X, Y, batch_size=32, epochs=1, verbose=0)
    saved, expected = model.get_weights(), model.predict(X, verbose=0)
    model.save_weights(tmp_path / "ckpt")
    for where in PLACES:
        place(reader, where)
        loaded = build()
        loaded.load_weights(tmp_path / "ckpt")
        assert flow.config.backend_name() == reader
        assert loaded.trainer.step("predict").runtime.__module__.startswith(f"flowlayers_{reader}")
        for a, b in zip(loaded.get_weights(), saved):
            np.testing.assert_array_equal(a, b)
        np.testing.assert_allclose(loaded.predict(X, verbose=0), expected, atol=1e-5)


def test_a_model_moves_to_the_other_engine_when_the_backend_is_switched():
    weights = start()
    place("tensorflow", PLACES[1])
    model = build()
    model.set_weights(weights)
    model.fit(X, Y, batch_size=32, epochs=1, verbose=0)
    trained = model.get_weights()
    flow.config.set_backend("jax")
    for a, b in zip(model.get_weights(), trained):
        np.testing.assert_array_equal(a, b)
    assert type(model.trainer.step("predict").runtime).__module__ == "flowlayers_jax.runtime"
    model.fit(X, Y, batch_size=32, epochs=1, verbose=0)        # trains on, on JAX, with the optimizer's state
    assert model.optimizer.iterations == 4


# a fresh process: on the tensorflow backend, a model exported as a jax artifact and the artifact loaded (both start
# JAX), then the same model trained on the jax backend on 2 devices
EXPORT_THEN_TRAIN = """
import numpy as np
import flowlayers as flow
flow.config.set_backend("tensorflow")
x = flow.Input((4,))
model = flow.Model(x, flow.layers.Dense(3)(x))
model.compile("sgd", "mse")
data = np.ones((8, 4), np.float32)
model.export(OUT, format="jax", verbose=False)
np.testing.assert_allclose(flow.export.load(OUT)(data), model.predict(data, verbose=0), atol=1e-6)
flow.config.set_backend("jax")
flow.config.gpu_device_num(2)
model.fit(data, np.zeros((8, 3), np.float32), batch_size=8, verbose=0)
print(len(model.trainer.step("train").runtime.devices))
"""


@pytest.mark.slow
def test_an_export_through_jax_leaves_a_later_jax_runtime_its_devices(tmp_path):
    """Exporting (or loading) a jax artifact starts JAX from any backend: it reserves the CPU devices first, as a
    runtime does, so the jax backend still has 2 devices afterwards (JAX's default, 1, made it a ConfigError)."""
    script = f"OUT = {str(tmp_path / 'served')!r}\n" + EXPORT_THEN_TRAIN
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.split()[-1] == "2", done.stdout
