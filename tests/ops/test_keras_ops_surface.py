"""``flow.ops`` as Keras 3's ``keras.ops``: each function has Keras' signature; what flowlayers cannot plan or lacks
is refused by name with a FlowLayersError saying what to use; every family of ops is still found by name."""
import inspect
import os

import numpy as np
import pytest

import flowlayers as flow
from conftest import BACKEND
from flowlayers import ops

os.environ.setdefault("KERAS_BACKEND", "jax" if BACKEND == "jax" else "tensorflow")
import keras  # noqa: E402

PUBLIC = sorted(n for n, v in vars(ops).items() if callable(v) and not n.startswith("_") and inspect.isfunction(v)
                and v.__module__.startswith("flowlayers.ops.keras_"))


def test_the_public_functions_are_many_and_keras_names():
    assert len(PUBLIC) >= 125, PUBLIC
    assert not [n for n in PUBLIC if not hasattr(keras.ops, n)]


@pytest.mark.parametrize("name", PUBLIC)
def test_signature_is_keras_3s(name):
    ours, theirs = inspect.signature(getattr(ops, name)), inspect.signature(getattr(keras.ops, name))
    assert [(p.name, p.default, p.kind) for p in ours.parameters.values()] == \
        [(p.name, p.default, p.kind) for p in theirs.parameters.values()], (ours, theirs)


def test_every_op_family_is_still_found_by_name():
    found = ops.by_name()
    for name in ("matmul", "einsum", "reshape", "conv2d", "layer_norm", "where", "take", "top_k", "cumsum",
                 "reduce_min", "fill_like", "slice"):
        assert name in found, name


def _blob():
    return flow.Input((3,))


@pytest.mark.parametrize("call, match", [
    (lambda: ops.where(ops.greater(_blob(), 0.0)), r"where\(condition\) without x1 and x2"),
    (lambda: ops.segment_sum(_blob(), np.array([0, 1])), r"num_segments=None .* data decides"),
    (lambda: ops.arange(ops.shape(_blob())[0]), r"arange: expected .*known when the graph is built"),
    (lambda: ops.zeros(ops.shape(_blob())), r"zeros: expected sizes known when the graph is built"),
    (lambda: ops.pad(_blob(), 1, mode="reflect"), r"mode 'reflect' is not supported"),
    (lambda: ops.one_hot(_blob(), 3, sparse=True), r"sparse=True\): sparse tensors are not supported"),
    (lambda: ops.convert_to_numpy(_blob()), r"has no value while the graph is built"),
    (lambda: ops.convert_to_tensor(np.ones(2), sparse=True), r"sparse tensors are not supported"),
    (lambda: ops.norm(ops.reshape(_blob(), (-1, 3, 1)), ord="nuc", axis=(1, 2)), r"needs singular values"),
    (lambda: ops.dot_product_attention(*[flow.Input((2, 1, 2))] * 3, flash_attention="yes"),
     r"flash_attention expected None, True or False, received 'yes'"),
    (lambda: ops.dot_product_attention(*[flow.Input((2, 1, 2))] * 3, attn_logits_soft_cap=20.0),
     r"attn_logits_soft_cap is not supported.*received 20.0"),
    (lambda: ops.dot_product_attention(*[np.ones((1, 2, 1, 2), np.float32)] * 3, flash_attention=True),
     r"flash_attention=True\): on numpy arrays .* no flash kernel"),
    (lambda: ops.moments(_blob(), [1], synchronized=True), r"synchronized=True\) is not supported"),
    (lambda: ops.conv(np.ones((1, 3, 1), np.float32), np.ones((2, 1, 1), np.float32)), r"convolutions in the graph"),
    (lambda: ops.broadcast_to(_blob(), (None, 2, 3)), r"a size None only where"),
    (lambda: ops.split(_blob(), 2, axis=1), r"a number of sections dividing axis 1 of size 3"),
    (lambda: ops.squeeze(_blob(), axis=1), r"a dim of size 1 at axis 1"),
    (lambda: ops.top_k(_blob(), 2, sorted=False), r"sorted=False"),
])
def test_what_cannot_be_planned_is_refused_by_name(call, match):
    with pytest.raises(flow.FlowLayersError, match=match):
        call()


@pytest.mark.parametrize("name, hint", [
    ("nonzero", "decided by the data"), ("unique", "decided by the data"), ("cond", "control flow"),
    ("while_loop", "control flow"), ("scan", "control flow"), ("svd", "decompositions"), ("fft", "Fourier"),
    ("scatter_update", "in-place"), ("layer_normalization", "LayerNormalization"), ("arccos", "nearest names"),
])
def test_a_keras_op_flowlayers_lacks_is_named_with_what_to_use(name, hint):
    with pytest.raises(flow.GraphError, match=rf"flow\.ops\.{name}: Keras 3's keras\.ops\.{name} is not in "
                                              rf"flowlayers; .*{hint}"):
        getattr(ops, name)
    with pytest.raises(flow.GraphError, match=name):
        exec(f"from flowlayers.ops import {name}")


def test_a_name_keras_lacks_too_stays_an_attribute_error():
    assert not hasattr(ops, "no_such_op") and not hasattr(ops, "__wrapped__")


def test_every_keras_op_is_here_or_refused_by_name():
    for name in (n for n in dir(keras.ops) if not n.startswith("_")):
        try:
            getattr(ops, name)
        except flow.FlowLayersError:
            pass


def test_no_file_imports_a_family_that_keras_names_shadow():
    """``flowlayers.ops.matmul`` (and einsum, shape, norm, conv) is Keras' function: a family of those names is
    imported by its module path (``from ..ops.shape import reshape``), never as ``from ..ops import shape``."""
    import re
    from pathlib import Path

    root = Path(flow.__file__).parent
    pattern = re.compile(r"^from \.+ops import .*\b(conv|einsum|matmul|norm|shape)\b(?! *=)", re.M)
    found = [str(p.relative_to(root)) for p in root.rglob("*.py") if pattern.search(p.read_text())]
    assert not found, found
