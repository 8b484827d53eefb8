"""Programs written as keras.io's examples write them (``tests/keras_programs/``), run twice from one source: under
flowlayers as written, and under Keras 3 with only their imports changed (``import flowlayers as keras`` becomes
``import keras``, ``from flowlayers import layers, ops`` becomes ``from keras import layers, ops``).

Each program defines ``get_data(mnist)`` (numpy arrays; ``mnist`` is ``keras.datasets.mnist.load_data()``'s result,
read from the real MNIST test set), ``make_model()`` (a compiled model) and ``train(model, data)`` (its ``History``);
optionally ``PLACES`` (where the math is the same as Keras', see below) and ``check(model, data, history)``.

Keras' model takes the initial weights of flowlayers' (copied in its weights' order, each shape checked); both
predict the same rows before training (1e-5), and train on the same batches in the same order.  flowlayers runs on
one device (mirrored), two mirrored replicas and two devices of the consistent view; each run's logs after every
epoch (loss and metrics) equal Keras' within 1e-5, and its predictions after training within 1e-4.
"""
import os
import re
import types
from pathlib import Path

import numpy as np
import pytest

import flowlayers as flow
from conftest import BACKEND

os.environ.setdefault("KERAS_BACKEND", "jax" if BACKEND == "jax" else "tensorflow")
import keras  # noqa: E402

HERE = Path(__file__).parent / "keras_programs"
PROGRAMS = sorted(p.stem for p in HERE.glob("*.py") if not p.stem.startswith("_"))
PLACES = {"one": ("mirrored", 1), "mirrored2": ("mirrored", 2), "consistent2": ("consistent", 2)}
TOLERANCE = 1e-5
# predictions after training: float32 rounding differences, amplified by Adam's division by sqrt(v) over the steps
AFTER = 1e-4
# the lines that differ between the two runs; nothing else of a program may name flowlayers
FLOW_IMPORTS = {"import flowlayers as keras": "import keras",
                "from flowlayers import ": "from keras import ",
                "from flowlayers.": "from keras."}


def load(name, api):
    """The program's module, its imports those of ``api`` ("flowlayers" or "keras")."""
    source = (HERE / f"{name}.py").read_text()
    lines = []
    for line in source.splitlines():
        if api == "keras":
            for ours, theirs in FLOW_IMPORTS.items():
                if line.startswith(ours):
                    line = theirs + line[len(ours):]
        lines.append(line)
    source = "\n".join(lines)
    named = [line for line in source.splitlines() if "flowlayers" in line]
    if api == "keras":
        assert not named, f"{name}: flowlayers outside the imports: {named}"
    module = types.ModuleType(f"keras_programs_{name}_{api}")
    module.__file__ = str(HERE / f"{name}.py")
    exec(compile(source, module.__file__, "exec"), module.__dict__)
    return module


def use(place):
    view, n = PLACES[place]
    flow.clear_session()
    flow.settings.set_view(None)
    flow.config.set_view(view)
    flow.config.gpu_device_num(n)
    flow.config.set_seed(0)


def rows(x, n):
    """The first ``n`` rows of every array in the nest ``x``."""
    if isinstance(x, dict):
        return {k: rows(v, n) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return type(x)(rows(v, n) for v in x)
    return x[:n]


def flat(y):
    if isinstance(y, dict):
        return [np.asarray(y[k]) for k in sorted(y)]
    if isinstance(y, (list, tuple)):
        return [np.asarray(v) for v in y]
    return [np.asarray(y)]


def close(got, want, what, tolerance=TOLERANCE):
    for g, w in zip(flat(got), flat(want), strict=True):
        np.testing.assert_allclose(g, w, rtol=tolerance, atol=tolerance, err_msg=what)


def run(module, data, initial=None):
    """Build, align the weights, predict, train, predict: what a program's run gives to compare."""
    model = module.make_model()
    before = model.predict(rows(data["x"], 8), verbose=0)
    if initial is None:
        initial = [np.asarray(w) for w in model.get_weights()]
    else:
        theirs = [tuple(np.shape(w)) for w in model.get_weights()]
        assert theirs == [w.shape for w in initial], (theirs, [w.shape for w in initial])
        model.set_weights(initial)
        before = model.predict(rows(data["x"], 8), verbose=0)
    history = module.train(model, data)
    after = model.predict(data.get("x_test", data["x"]), verbose=0)
    if hasattr(module, "check"):
        module.check(model, data, history)
    return initial, before, history.history, after


@pytest.fixture(scope="module")
def mnist(shared_data):
    with pytest.warns(UserWarning, match="test set doubles"):
        return flow.data.load_mnist_arrays(shared_data)


@pytest.mark.parametrize("name", PROGRAMS)
def test_program_trains_as_keras(name, mnist):
    ours, theirs = load(name, "flowlayers"), load(name, "keras")
    data = ours.get_data(mnist)
    use("one")
    initial, *_ = run(ours, data)
    _, k_before, k_logs, k_after = run(theirs, data, initial)
    for place in getattr(ours, "PLACES", PLACES):
        use(place)
        _, before, logs, after = run(ours, data, initial)
        close(before, k_before, f"{name}, predictions before training, {place}")
        assert sorted(logs) == sorted(k_logs), (place, sorted(logs), sorted(k_logs))
        for key in k_logs:
            close(logs[key], k_logs[key], f"{name}, {key} after each epoch, {place}")
        close(after, k_after, f"{name}, predictions after training, {place}", AFTER)
