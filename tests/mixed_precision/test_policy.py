"""Dtype policies: Keras 3's names and meaning, and what a layer computes in, keeps its variables in and returns."""
import keras
import numpy as np
import pytest

import flowlayers as flow

NAMES = ["float32", "float16", "bfloat16", "float64", "mixed_float16", "mixed_bfloat16"]


@pytest.mark.parametrize("name", NAMES)
def test_a_policy_means_what_keras_policy_of_that_name_means(name):
    ours, theirs = flow.mixed_precision.Policy(name), keras.mixed_precision.Policy(name)
    assert (ours.name, ours.compute_dtype, ours.variable_dtype) == (theirs.name, theirs.compute_dtype,
                                                                    theirs.variable_dtype)
    assert repr(ours) == repr(theirs) and ours.get_config() == theirs.get_config()
    assert flow.DTypePolicy.from_config(ours.get_config()) == ours


def test_the_global_policy_is_set_read_and_reset():
    assert flow.mixed_precision.global_policy() == flow.DTypePolicy("float32")
    flow.mixed_precision.set_global_policy("mixed_bfloat16")
    assert flow.mixed_precision.global_policy().name == "mixed_bfloat16"
    assert flow.mixed_precision.dtype_policy() == flow.mixed_precision.global_policy()
    assert flow.DTypePolicy().name == "mixed_bfloat16"          # None: the global policy, as in Keras
    flow.mixed_precision.set_global_policy(flow.mixed_precision.Policy("mixed_float16"))
    assert flow.layers.Dense(2).dtype_policy.name == "mixed_float16"
    flow.mixed_precision.set_global_policy(None)
    assert flow.mixed_precision.global_policy().name == "float32"


@pytest.mark.parametrize("bad", ["mixed_float8", "halfish", 3, "int4"])
def test_a_wrong_policy_name_is_refused_by_name_and_changes_nothing(bad):
    with pytest.raises(flow.DTypeError) as e:
        flow.mixed_precision.set_global_policy(bad)
    assert repr(bad) in str(e.value) and "mixed_bfloat16" in str(e.value)
    assert flow.mixed_precision.global_policy().name == "float32"
    with pytest.raises(flow.DTypeError) as e:
        flow.layers.Dense(2, dtype=bad)
    assert repr(bad) in str(e.value) and "layer 'Dense': dtype" in str(e.value)
    assert flow.layers.Dense(2).name == "dense"        # the refused layer took no name


def test_a_mixed_layer_computes_in_the_half_dtype_and_keeps_float32_variables():
    x = flow.Input((4,))                                 # float32
    dense = flow.layers.Dense(3, dtype="mixed_bfloat16")
    y = dense(x)
    assert y.dtype == flow.bfloat16 and dense.compute_dtype == flow.bfloat16
    assert dense.dtype == dense.variable_dtype == flow.float32
    assert [w.dtype for w in dense.weights] == [flow.float32, flow.float32]
    casts = [n for n in _nodes(y) if n.op.name == "cast"]
    assert sorted(n.attrs["dtype"].name for n in casts) == ["bfloat16"] * 3    # input, kernel and bias


def test_a_float32_head_returns_float32_and_the_loss_is_float32():
    flow.mixed_precision.set_global_policy("mixed_bfloat16")
    x = flow.Input((4,))
    h = flow.layers.Dense(8, activation="relu")(x)
    head = flow.layers.Dense(3, dtype="float32")
    out = head(h)
    assert h.dtype == flow.bfloat16 and out.dtype == flow.float32 and head.dtype_policy.name == "float32"
    logits = flow.layers.Dense(3)(h)
    loss = flow.losses.MeanSquaredError()
    assert loss.label_spec(logits)[1] == flow.float32
    assert loss(flow.Input((3,)), logits).dtype == flow.float32
    assert flow.losses.SparseCategoricalCrossentropy(from_logits=True)(
        flow.Input((), dtype=flow.int32), logits).dtype == flow.float32
    assert {b.dtype for b in flow.metrics.MeanSquaredError().statistics(flow.Input((3,)), logits)} == {flow.float32}


def test_normalisation_statistics_are_float32_and_the_output_the_compute_dtype():
    flow.mixed_precision.set_global_policy("mixed_bfloat16")
    x = flow.Input((6,))
    h = flow.layers.Dense(8)(x)
    for layer in (flow.layers.LayerNormalization(), flow.layers.BatchNormalization(),
                  flow.layers.GroupNormalization(groups=2)):
        y = layer(h)
        assert y.dtype == flow.bfloat16 and all(w.dtype == flow.float32 for w in layer.weights)
        norm = next(n for n in _nodes(y) if n.op.name in ("layer_norm", "batch_norm", "reduce_mean"))
        assert all(i.dtype == flow.float32 for i in norm.inputs), layer


def test_an_embedding_gathers_float32_rows_then_casts_them():
    flow.mixed_precision.set_global_policy("mixed_bfloat16")
    ids = flow.Input((5,), dtype=flow.int32)
    emb = flow.layers.Embedding(10, 4)
    y = emb(ids)
    assert y.dtype == flow.bfloat16 and y.node.op.name == "cast"
    assert y.node.inputs[0].node.op.name == "gather"


def test_get_config_keeps_the_policy_name():
    dense = flow.layers.Dense(3, dtype="mixed_float16", name="d")
    config = dense.get_config()
    assert config["dtype"] == "mixed_float16"
    assert flow.layers.Dense.from_config({**config, "name": "e"}).dtype_policy.name == "mixed_float16"


def _nodes(blob):
    seen, out, todo = set(), [], [blob.node]
    while todo:
        node = todo.pop()
        if id(node) in seen:
            continue
        seen.add(id(node))
        out.append(node)
        todo.extend(i.node for i in node.inputs)
    return out
