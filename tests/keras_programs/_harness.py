"""Running a program of this folder under flowlayers or, with its imports changed, under Keras 3; and, as a script,
one program's Keras run in a process of its own (``KERAS_BACKEND`` set there before Keras is imported)::

    KERAS_BACKEND=jax python tests/keras_programs/_harness.py NAME IN.pkl OUT.pkl

reads ``(data, initial weights)`` from IN.pkl and writes ``(predictions before, logs, predictions after)``."""
import pickle
import sys
import types
from pathlib import Path

import numpy as np

HERE = Path(__file__).parent
# the lines that differ between the two runs; nothing else of a program may name flowlayers
FLOW_IMPORTS = {"import flowlayers as keras": "import keras",
                "from flowlayers import ": "from keras import ",
                "from flowlayers.": "from keras."}


def load(name, api):
    """The program's module, its imports those of ``api`` ("flowlayers" or "keras")."""
    lines = []
    for line in (HERE / f"{name}.py").read_text().splitlines():
        if api == "keras":
            for ours, theirs in FLOW_IMPORTS.items():
                if line.startswith(ours):
                    line = theirs + line[len(ours):]
        lines.append(line)
    named = [line for line in lines if "flowlayers" in line]
    if api == "keras":
        assert not named, f"{name}: flowlayers outside the imports: {named}"
    module = types.ModuleType(f"keras_programs_{name}_{api}")
    module.__file__ = str(HERE / f"{name}.py")
    exec(compile("\n".join(lines), module.__file__, "exec"), module.__dict__)
    return module


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


def run(module, data, initial=None, keras=None):
    """Build, set the initial weights, predict, train, predict: what a program's run gives to compare.  ``keras``:
    Keras' module where ``module`` runs under it."""
    if keras is not None:
        keras.backend.clear_session()       # Keras' automatic names from the start, as flowlayers' after use()
        keras.utils.set_random_seed(0)      # its dropout masks the same from run to run
    model = module.make_model()
    before = model.predict(rows(data["x"], 8), verbose=0)
    if initial is None:
        initial = {w.path: w.numpy() for w in model.weights}
    else:
        assign(model, initial)
        before = model.predict(rows(data["x"], 8), verbose=0)
    history = module.train(model, data)
    after = model.predict(data.get("x_test", data["x"]), verbose=0)
    if hasattr(module, "check"):
        module.check(model, data, history)
    return initial, before, history.history, after


def assign(model, initial):
    """flowlayers' initial weights into Keras' ``model``, layer by layer: Keras 3 writes a weight's path from every
    layer that holds it (``transformer_block/sequential/dense/kernel``) and names an unnamed weight from a count over
    the process (``linear_1/variable_2``), flowlayers from the layer that made it (``dense/kernel``, ``variable``
    counted within the layer); and the two may list a model's weights in different orders.  So a Keras layer's
    weights take, in order, those of the flowlayers layer whose path ends its path."""
    theirs, ours = layer_groups(model.weights), layer_groups(initial)
    used = set()
    for path, weights in theirs.items():
        match = max((p for p in ours if path == p or path.endswith("/" + p)), key=len, default=None)
        assert match is not None, f"Keras' layer {path}: no layer of flowlayers' model ends it: {list(ours)}"
        used.add(match)
        assert len(weights) == len(ours[match]), (path, match)
        for w, p in zip(weights, ours[match]):
            assert tuple(w.shape) == initial[p].shape, (w.path, p, tuple(w.shape), initial[p].shape)
            w.assign(initial[p])
    assert used == set(ours), (list(theirs), list(ours))


def layer_groups(weights):
    """{layer path: [weight (or path), ...]} in the order given."""
    groups = {}
    for w in weights:
        path = w if isinstance(w, str) else w.path
        groups.setdefault(path.rsplit("/", 1)[0], []).append(w)
    return groups


def main(name, given, out):
    import keras
    with open(given, "rb") as f:
        data, initial = pickle.load(f)
    _, before, logs, after = run(load(name, "keras"), data, initial, keras)
    with open(out, "wb") as f:
        pickle.dump((keras.backend.backend(), before, logs, after), f)


if __name__ == "__main__":
    main(*sys.argv[1:])
