"""Keras 3's names as a Keras program imports them: ``flow.layers.Input``/``InputLayer`` with Keras' signatures, an
Embedding fed float ids as Keras casts them, and every Keras name of ``layers``, ``models``, ``ops``, ``callbacks``,
``losses``, ``activations``, ``initializers`` and ``metrics`` either here or refused by name saying what to use
instead."""
import inspect
import os

import numpy as np
import pytest

import flowlayers as flow
from conftest import BACKEND

os.environ.setdefault("KERAS_BACKEND", "jax" if BACKEND == "jax" else "tensorflow")
import keras  # noqa: E402


def _params(fn, skip=()):
    return [(p.name, p.default) for p in inspect.signature(fn).parameters.values() if p.name not in skip]


def test_input_and_input_layer_take_keras_3s_signatures():
    from flowlayers.layers import Input, InputLayer

    assert Input is flow.Input
    assert _params(Input) == _params(keras.Input)
    assert _params(InputLayer) == _params(keras.layers.InputLayer.__init__, skip=("self", "kwargs"))


def test_input_forms():
    assert flow.layers.Input(shape=(3,)).shape == (None, 3)
    assert flow.layers.Input(batch_shape=(4, 3)).shape == (4, 3)
    assert flow.layers.Input((2,), dtype="int32").dtype == flow.int32
    x = flow.Input((3,))
    assert flow.Input(tensor=x) is x and flow.layers.InputLayer(input_tensor=x, shape=(3,)) is x


@pytest.mark.parametrize("kwargs, error, match", [
    ({"shape": (3,), "sparse": True}, flow.InputError, r"sparse=True is not supported"),
    ({"shape": (3,), "ragged": True}, flow.InputError, r"ragged=True is not supported"),
    ({"shape": (3,), "optional": True}, flow.InputError, r"optional=True is not supported"),
    ({}, flow.ShapeError, r"expected shape or batch_shape"),
    ({"shape": (3,), "batch_shape": (2, 3)}, flow.ShapeError, r"expected shape or batch_shape"),
    ({"batch_shape": (2, 3), "batch_size": 2}, flow.ShapeError, r"batch_size or batch_shape, not both"),
    ({"shape": (4,), "tensor": "x"}, flow.InputError, r"tensor expected an input Blob"),
])
def test_input_refuses_what_it_cannot_honour_by_name(kwargs, error, match):
    with pytest.raises(error, match=match):
        flow.layers.Input(**kwargs)


def test_an_input_layer_starts_a_sequential():
    model = flow.Sequential([flow.layers.InputLayer(shape=(3,)), flow.layers.Dense(2)])
    assert model.predict(np.ones((5, 3), np.float32), verbose=0).shape == (5, 2)


def test_embedding_casts_float_ids_as_keras_and_checks_their_range():
    ids = np.array([[0, 3, 1], [2, 2, 4]], np.float32)
    out = {}
    for api in (keras, flow):
        x = api.Input((3,))                 # Keras' default dtype: float32
        emb = api.layers.Embedding(5, 2)
        out[api] = (api.Model(x, emb(x)), emb)
    out[flow][1].set_weights(out[keras][1].get_weights())
    np.testing.assert_allclose(out[flow][0].predict(ids, verbose=0), out[keras][0].predict(ids, verbose=0))
    with pytest.raises(flow.InputError, match=r"ids of layer 'embedding.*expected values in \[0, 5\)"):
        out[flow][0].predict(ids + 4, verbose=0)


# ---------------------------------------------------------------------------------------------- clear misses
@pytest.mark.parametrize("namespace, name, error, hint", [
    ("layers", "Conv3DTranspose", flow.LayerError, "use flow.layers.Conv3D"),
    ("layers", "RNN", flow.LayerError, "an RNN of your own cell"),
    ("layers", "JaxLayer", flow.LayerError, "whose call uses flow.ops"),
    ("layers", "Cropping3D", flow.LayerError, "this 3-D layer is not in flowlayers"),
    ("layers", "DepthwiseConv1D", flow.LayerError, "nearest names here are.*DepthwiseConv2D"),
    ("models", "clone_model", flow.ConfigError, "set_weights"),
    ("callbacks", "RemoteMonitor", flow.ConfigError, "keras.callbacks.RemoteMonitor to fit"),
    ("callbacks", "OrbaxCheckpoint", flow.ConfigError, "BackupAndRestore"),
    ("ops", "nonzero", flow.GraphError, "flow.ops.where"),
    ("losses", "Dice", flow.ConfigError, "write a flow.losses.Loss"),
    ("losses", "ctc", flow.ConfigError, "CTC is not in flowlayers"),
    ("initializers", "STFTInitializer", flow.LayerError, "STFT kernels are not in flowlayers"),
])
def test_a_keras_name_flowlayers_lacks_is_a_named_error(namespace, name, error, hint):
    pattern = rf"flow\.{namespace}\.{name}: Keras 3's keras\.{namespace}\.{name} is not in flowlayers; .*{hint}"
    with pytest.raises(error, match=pattern):
        getattr(getattr(flow, namespace), name)
    with pytest.raises(error, match=pattern):
        exec(f"from flowlayers.{namespace} import {name}")


def test_no_hint_is_given_for_a_name_that_exists():
    """A hint is for a Keras name flowlayers lacks: one for a name the namespace has is stale (it would say the
    layer is missing where it is not)."""
    from flowlayers import missing
    stale = [(space, name) for space, table in missing.TABLES.items() for name in table
             if name in vars(getattr(flow, space))]
    assert not stale, stale


@pytest.mark.parametrize("namespace", ["layers", "models", "ops", "callbacks", "losses", "activations",
                                       "initializers", "metrics", "optimizers", "utils", "saving", "random",
                                       "datasets", "constraints"])
def test_every_keras_name_is_here_or_refused_by_name(namespace):
    missing = []
    for name in (n for n in dir(getattr(keras, namespace)) if not n.startswith("_")):
        try:
            getattr(getattr(flow, namespace), name)
        except flow.FlowLayersError:
            pass
        except AttributeError:
            missing.append(name)
    assert not missing, missing
    assert not hasattr(getattr(flow, namespace), "not_a_keras_name")
