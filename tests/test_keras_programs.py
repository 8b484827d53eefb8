"""Programs written as keras.io's examples write them (``tests/keras_programs/``), run twice from one source: under
flowlayers as written, and under Keras 3 with only their imports changed (``import flowlayers as keras`` becomes
``import keras``, ``from flowlayers import layers, ops`` becomes ``from keras import layers, ops``).

Each program defines ``get_data(mnist)`` (numpy arrays; ``mnist`` is ``keras.datasets.mnist.load_data()``'s result,
read from the real MNIST test set), ``make_model()`` (a compiled model) and ``train(model, data)`` (its ``History``),
and optionally ``check(model, data, history)``.

Keras' model takes the initial weights of flowlayers' (layer by layer, each shape checked); both predict the same
rows before training (1e-5), and train on the same batches in the same order.  Keras runs on the engine
``KERAS_BACKEND`` names (or TensorFlow, where TensorFlow's import brought Keras in first), but on JAX for the
programs of ``SPARSE_GRADIENTS``.  flowlayers runs on one device (mirrored), two mirrored replicas and two devices of
the consistent view; each run's logs after every epoch (loss and metrics) equal Keras' within 1e-5 and one device's
within 1e-5, and its predictions after training Keras' within 1e-4, except where ``NOT_THE_SAME`` says why the math
differs.  Run with ``-s`` to see each loss's largest relative difference from Keras'.
"""
import os
import pickle
import re
import subprocess
import sys

import numpy as np
import pytest

import flowlayers as flow
import flowlayers as keras_
from conftest import BACKEND
from flowlayers import ops as ops_
from keras_programs._harness import HERE, flat, load, run
from places import use

os.environ.setdefault("KERAS_BACKEND", "jax" if BACKEND == "jax" else "tensorflow")
import keras  # noqa: E402

PROGRAMS = sorted(p.stem for p in HERE.glob("*.py") if not p.stem.startswith("_"))
PLACES = {"one": ("mirrored", 1), "mirrored2": ("mirrored", 2), "consistent2": ("consistent", 2)}
TOLERANCE = 1e-5
# predictions after training: float32 rounding differences, amplified by Adam's division by sqrt(v) over the steps
AFTER = 1e-4
# Keras 3 on TensorFlow squares an Embedding's sparse gradient (IndexedSlices) per occurrence of an id, not per id,
# so where a batch repeats an id its Adam and RMSprop steps are not the dense gradient's, which flowlayers takes on
# both engines and Keras 3 on JAX takes: these programs are matched with Keras 3 on JAX, run in a process of its own
# where this one's Keras runs on TensorFlow
SPARSE_GRADIENTS = {"transformer_text", "functional_multi_io", "bidirectional_text"}
# where a run is not the same math as Keras' run: {(program, place): (tolerance, why)}
DROPOUT_MASKS = (5e-2, "Keras and flowlayers draw different dropout masks (flowlayers draws the same in every view)")
PER_REPLICA_STATISTICS = (2e-2, "BatchNormalization in the mirrored view normalises by each replica's own batch "
                                "statistics (as Keras' MirroredStrategy does), not by the whole batch's")
NOT_THE_SAME = {("timeseries_fcn", "mirrored2"): PER_REPLICA_STATISTICS,
                ("batchnorm_dropout", "one"): DROPOUT_MASKS, ("batchnorm_dropout", "consistent2"): DROPOUT_MASKS,
                ("batchnorm_dropout", "mirrored2"): (5e-2, f"{DROPOUT_MASKS[1]}; {PER_REPLICA_STATISTICS[1]}")}


def compare_log(key, got, want, what, tolerance=None):
    """A loss within 1e-5; a metric too, or, where the predictions of one example lie within rounding of a threshold
    (an accuracy's argmax, a confusion count's 0.5), within that example's weight: one of a count, 1/32 of a ratio
    (the smallest set counted here has 32 examples).  Where the math is not the same (``tolerance`` given), a loss
    within ``tolerance``; the metrics then say nothing more."""
    got, want = np.asarray(got, np.float64), np.asarray(want, np.float64)
    if key == "loss":
        print(f"{what.split(' (')[0]}: largest relative difference {np.max(np.abs(got - want) / want):.1e}")
    if tolerance is not None:
        if key.endswith("loss"):
            np.testing.assert_allclose(got, want, rtol=tolerance, err_msg=what)
        return
    if key.endswith("loss") or np.allclose(got, want, rtol=TOLERANCE, atol=TOLERANCE):
        return close(got, want, what)
    example = 1.0 if re.sub("^val_", "", key) in ("fn", "fp", "tn", "tp") else 1 / 32
    np.testing.assert_allclose(got, want, atol=example, err_msg=what)


def close(got, want, what, tolerance=TOLERANCE):
    for g, w in zip(flat(got), flat(want), strict=True):
        np.testing.assert_allclose(g, w, rtol=tolerance, atol=tolerance, err_msg=what)


@pytest.fixture(scope="module")
def mnist(shared_data):
    with pytest.warns(UserWarning, match="test set doubles"):
        return flow.data.load_mnist_arrays(shared_data)


# the programs that take longer than a few seconds per run (each runs 4 times: Keras, and flowlayers in 3 places)
SLOW = {"bidirectional_text", "imbalanced_classification", "functional_multi_io", "mlp_mixer", "transformer_text",
        "timeseries_fcn", "mnist_convnet", "denoising_autoencoder", "batchnorm_dropout"}


@pytest.mark.parametrize("name", [pytest.param(n, marks=pytest.mark.slow) if n in SLOW else n for n in PROGRAMS])
def test_program_trains_as_keras(name, mnist, tmp_path):
    ours = load(name, "flowlayers")
    data = ours.get_data(mnist)
    use(*PLACES["one"], seed=0, fresh=True)
    initial, *_ = run(ours, data)
    k_before, k_logs, k_after = keras_run(name, data, initial, tmp_path)
    one_logs = None
    for place in PLACES:
        use(*PLACES[place], seed=0, fresh=True)
        _, before, logs, after = run(ours, data, initial)
        close(before, k_before, f"{name}, predictions before training, {place}")
        assert sorted(logs) == sorted(k_logs), (place, sorted(logs), sorted(k_logs))
        tolerance, why = NOT_THE_SAME.get((name, place), (None, ""))
        for key in k_logs:
            compare_log(key, logs[key], k_logs[key], f"{name}, {key} after each epoch, {place} ({why})", tolerance)
        one_logs = one_logs if place != "one" else logs
        if PER_REPLICA_STATISTICS[1] not in why:     # every view is one device's
            for key in logs:
                compare_log(key, logs[key], one_logs[key], f"{name}, {key} after each epoch, {place} vs one device")
        close(after, k_after, f"{name}, predictions after training, {place} ({why})", tolerance or AFTER)


def keras_run(name, data, initial, tmp_path):
    """Keras' predictions before training, logs and predictions after: in this process, or for a program of
    ``SPARSE_GRADIENTS`` where this process's Keras runs on TensorFlow, on JAX in a process of its own."""
    if name not in SPARSE_GRADIENTS or keras.backend.backend() == "jax":
        return run(load(name, "keras"), data, initial, keras)[1:]
    with open(tmp_path / "in.pkl", "wb") as f:
        pickle.dump((data, initial), f)
    env = dict(os.environ, KERAS_BACKEND="jax", JAX_PLATFORMS="cpu")
    done = subprocess.run([sys.executable, str(HERE / "_harness.py"), name, str(tmp_path / "in.pkl"),
                           str(tmp_path / "out.pkl")], env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    with open(tmp_path / "out.pkl", "rb") as f:
        backend, *result = pickle.load(f)
    assert backend == "jax"
    return result


# keras.io's lines that flowlayers lacks, as a program writes them with flowlayers' imports: each a named error
REFUSED = {
    "keras.io's GAN latent draw in a step": (lambda: keras_.random.normal(shape=(4, 8)), flow.ConfigError,
                                             r"keras.random.normal is not in flowlayers; random numbers inside a "
                                             r"model step"),
    "keras.io's Patches": (lambda: ops_.image.extract_patches(np.zeros((1, 28, 28, 1), "float32"), 7),
                           flow.GraphError, r"keras.ops.image is not in flowlayers"),
    "a Dense after Flatten of a free length": (
        lambda: keras_.layers.Dense(1)(keras_.layers.Flatten()(keras_.layers.Embedding(5, 3)(keras_.Input((None,))))),
        flow.LayerError, r"weight 'kernel' expected a shape of known sizes"),
}


@pytest.mark.parametrize("what", sorted(REFUSED))
def test_what_flowlayers_lacks_is_refused_by_name(what):
    make, error, match = REFUSED[what]
    with pytest.raises(error, match=match):
        make()
