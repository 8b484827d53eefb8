"""``flow.ops`` against Keras 3's ``keras.ops``: every function of ``keras_cases.py``, called as a Keras program
calls it.

- On numpy arrays (eager, as Keras' ops run on concrete values): the result equals ``keras.ops``' on the same
  arrays, dtype included.
- On Blobs (in a model): ``predict`` equals ``keras.ops`` on the same data, and one SGD step of a model through it
  moves every input's scale and every parameter by minus the gradient of float64 central differences of the same
  function on the host (the harness of tests/reference.py).

Keras runs on the engine flowlayers runs on (``KERAS_BACKEND`` set before Keras is imported).
"""
import os

import numpy as np
import pytest

from conftest import BACKEND
from flowlayers import ops
from keras_cases import CASES, HOST_ONLY
from reference import N, check

os.environ.setdefault("KERAS_BACKEND", "jax" if BACKEND == "jax" else "tensorflow")
import keras  # noqa: E402


pytestmark = pytest.mark.usefixtures("one_device")


def _tuple(x):
    return tuple(x) if isinstance(x, (list, tuple)) else (x,)


def _sampled(specs, seed=0):
    """The values ``check`` feeds for ``specs`` (its first draws from the same generator)."""
    rng = np.random.default_rng(seed)
    return [s.sample(rng, N) for s in specs]


def _same(got, want, rtol, atol, what):
    got, want = np.asarray(got), np.asarray(keras.ops.convert_to_numpy(want))
    assert got.shape == want.shape, (what, got.shape, want.shape)
    assert got.dtype == want.dtype or (got.dtype.kind == want.dtype.kind == "f"), (what, got.dtype, want.dtype)
    if got.dtype == bool or got.dtype.kind in "iu":
        np.testing.assert_array_equal(got, want, err_msg=what)
    else:
        np.testing.assert_allclose(got, want, rtol=rtol, atol=atol, err_msg=what)


@pytest.mark.parametrize("name", sorted(n for n in CASES if CASES[n][2].get("eager", True)))
def test_on_arrays_equals_keras(name):
    fn, specs, options = CASES[name]
    values = _sampled(specs)
    got, want = _tuple(fn(ops, *values)), _tuple(fn(keras.ops, *values))
    assert len(got) == len(want)
    for k, (g, w) in enumerate(zip(got, want)):
        assert isinstance(g, np.ndarray), (name, type(g))
        _same(g, w, options.get("rtol", 1e-5), options.get("atol", 1e-6), f"{name} output {k}")


@pytest.mark.parametrize("name", sorted(n for n in CASES if CASES[n][2].get("graph", True)))
def test_in_a_model_equals_keras_with_gradients(name):
    fn, specs, options = CASES[name]
    want = _tuple(fn(keras.ops, *_sampled(specs)))
    reference = (lambda *xs: fn(ops, *xs)) if options.get("eager", True) else (lambda *xs: fn(keras.ops, *xs))
    got = check(specs, lambda *blobs: fn(ops, *blobs), reference, grad=options.get("grad", True),
                rtol=options.get("rtol", 1e-5), atol=options.get("atol", 1e-5))
    for k, (g, w) in enumerate(zip(got, want)):
        _same(g, w, options.get("rtol", 1e-5), options.get("atol", 1e-5), f"{name} output {k} in a model")


@pytest.mark.parametrize("name", sorted(HOST_ONLY))
def test_new_arrays_equal_keras(name):
    _same(HOST_ONLY[name](ops), HOST_ONLY[name](keras.ops), 1e-6, 1e-7, name)
