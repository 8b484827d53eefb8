"""``model.export`` from whatever place trained the model, served by a fresh process that imports no flowlayers:
a conv net trained in the mirrored view on 2 devices, a GPT (causal multi-head attention, GELU MLP) and an MLP
trained with tensor parallelism on a data=2 x model=2 mesh, each exported as a SavedModel (served by
``tf.saved_model.load(path).serve``) and as a ``jax.export`` artifact (served by ``jax.export.deserialize`` and
numpy); both return what ``predict`` returns, within 1e-6."""
import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import flowlayers as flow
import places

SPEC = importlib.util.spec_from_file_location(
    "char_gpt", Path(__file__).resolve().parents[2] / "tutorials" / "07_char_gpt.py")
char_gpt = importlib.util.module_from_spec(SPEC)
SPEC.loader.exec_module(char_gpt)

RNG = np.random.default_rng(7)
MEGATRON = {r"^fc1/kernel$": (None, "model"), r"^fc1/bias$": ("model",), r"^fc2/kernel$": ("model", None)}

# What the serving process runs: only TensorFlow or JAX, and numpy.  The SavedModel's ``serve`` takes the model's
# inputs as Keras' does (one array, or a list of them as one argument); the jax artifact's ``call`` the weights, then
# the same arguments.
SERVE = {
    "tf_saved_model": """
import tensorflow as tf
def serve(path, arguments):
    loaded = tf.saved_model.load(path)      # held while serve runs: the endpoint reads its variables
    return loaded.serve(*arguments).numpy()
""",
    "jax": """
from jax import export
def serve(path, arguments):
    with open(path + "/model.jax", "rb") as f:
        exported = export.deserialize(bytearray(f.read()))
    stored = np.load(path + "/weights.npz")
    weights = [stored[f"arr_{k}"] for k in range(len(stored.files))]
    return np.asarray(exported.call(weights, *arguments))
"""}
MAIN = """
import json, sys
import numpy as np
{serve}
feeds = np.load(sys.argv[1] + "/feeds.npz")
results = {{}}
for name, count in json.loads(sys.argv[2]).items():
    inputs = [feeds[f"{{name}}_{{k}}"] for k in range(count)]
    results[name] = serve(sys.argv[1] + "/" + name + "_{format}", [inputs[0]] if count == 1 else [inputs])
assert "flowlayers" not in sys.modules, sorted(m for m in sys.modules if m.startswith("flowlayers"))
np.savez(sys.argv[1] + "/served_{format}.npz", **results)
"""


def conv_net():
    places.consistent(1)
    flow.config.set_view("mirrored")
    flow.config.gpu_device_num(2)
    x = flow.Input((8, 8, 1))
    h = flow.layers.Conv2D(6, 3, activation="relu", padding="same")(x)
    h = flow.layers.MaxPooling2D(2)(h)
    h = flow.layers.Conv2D(4, 3, activation="relu")(h)
    h = flow.layers.Flatten()(h)
    model = flow.Model(x, flow.layers.Dense(10)(flow.layers.Dropout(0.5)(h)))
    model.compile(flow.optimizers.Adam(0.01), flow.losses.SparseCategoricalCrossentropy(from_logits=True))
    x = RNG.normal(size=(16, 8, 8, 1)).astype(np.float32)
    return model, [x], RNG.integers(0, 10, 16)


def gpt():
    seq, vocab = 8, 20
    places.consistent(4, {"data": 2, "model": 2}, {**flow.parallel.attention_rules(), **char_gpt.MLP_RULES}, seed=3)
    model = char_gpt.gpt(vocab, seq, width=16, heads=4, blocks=2)
    model.compile(flow.optimizers.Adam(0.01), flow.losses.SparseCategoricalCrossentropy(from_logits=True))
    ids = RNG.integers(0, vocab, (8, seq)).astype(np.int32)
    positions = np.broadcast_to(np.arange(seq, dtype=np.int32), ids.shape).copy()
    return model, [ids, positions], np.roll(ids, -1, axis=1)


def mlp():
    places.consistent(4, {"data": 2, "model": 2}, MEGATRON, seed=1)
    x = flow.Input((12,))
    h = flow.layers.Dense(16, activation="relu", name="fc1")(x)
    model = flow.Model(x, flow.layers.Dense(5, name="fc2")(h))
    model.compile(flow.optimizers.SGD(0.1, momentum=0.9), "mse")
    x = RNG.normal(size=(8, 12)).astype(np.float32)
    return model, [x], RNG.normal(size=(8, 5)).astype(np.float32)


def writes(format):
    """Whether a backend with its engine installed writes ``format`` here."""
    return any(format in flow.engine.capabilities(name).exports and flow.engine.has_engine(name)
               for name in flow.engine.available())


@pytest.mark.slow
@pytest.mark.needs_tensorflow      # serves a SavedModel
def test_exported_models_served_without_flowlayers_equal_predict(tmp_path):
    formats = [f for f in ("tf_saved_model", "jax") if writes(f)]
    expected, feeds, counts = {}, {}, {}
    for name, make in (("conv", conv_net), ("gpt", gpt), ("mlp", mlp)):
        model, inputs, labels = make()
        model.fit(inputs if len(inputs) > 1 else inputs[0], labels, batch_size=8, epochs=1, verbose=0)   # 1-2 steps
        expected[name] = model.predict(inputs if len(inputs) > 1 else inputs[0], verbose=0)
        for k, array in enumerate(inputs):
            feeds[f"{name}_{k}"] = array
        counts[name] = len(inputs)
        for format in formats:
            model.export(tmp_path / f"{name}_{format}", format=format, verbose=False)
    np.savez(tmp_path / "feeds.npz", **feeds)
    assert "tf_saved_model" in formats and (flow.config.backend_name() != "jax" or "jax" in formats)
    env = {k: v for k, v in os.environ.items() if not k.startswith("FLOWLAYERS")}
    for format in formats:
        script = MAIN.format(serve=SERVE[format], format=format)
        done = subprocess.run([sys.executable, "-c", script, str(tmp_path), json.dumps(counts)], env=env,
                              capture_output=True, text=True, timeout=600)
        assert done.returncode == 0, f"{format}:\n{done.stderr[-3000:]}"
        served = np.load(tmp_path / f"served_{format}.npz")
        for name, want in expected.items():
            assert served[name].shape == want.shape
            print(f"{name}, {format}: max |served - predict| = {np.abs(served[name] - want).max():.2e}")
            np.testing.assert_allclose(served[name], want, rtol=0, atol=1e-6, err_msg=f"{name}, {format}")
