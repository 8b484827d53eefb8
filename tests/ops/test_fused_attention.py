"""The fused attention op (``flowlayers/ops/attention.py``: one graph op, the engine's fused kernel) against float64
numpy, Keras 3's ``keras.ops.dot_product_attention`` and MultiHeadAttention, and against the same attention composed
of einsums, a where and a softmax: forward, and three training steps of a small model, within 1e-5, with causal,
key-padding and (batch, query, key) masks, grouped-query heads, in every view (the batch split over 2 devices, the
heads split over ``model`` on a data=2,model=2 mesh, 2 mirrored replicas); ``flash_attention=True`` refused where
no flash kernel runs."""
import math

import keras
import numpy as np
import pytest

import flowlayers as flow
import places
from flowlayers import ops

RNG = np.random.default_rng(40)
B, T, D, N, H = 4, 5, 8, 2, 3
X = RNG.normal(size=(B, T, D)).astype(np.float32)
Y = RNG.normal(size=(B, T, D)).astype(np.float32)
PAD = np.ones((B, 1, 1, T), bool)
PAD[:, ..., 3:] = RNG.random((B, 1, 1, 2)) > 0.5                     # some keys of some rows padded away
QKS = RNG.random((B, 1, T, T)) > 0.3
QKS[..., 0] = True                                                   # every query sees its first key

# case: (query heads, key heads, mask fed as an input or None, is_causal)
CASES = {"causal": (N, N, None, True), "padding": (N, N, PAD, False), "causal_padding": (N, N, PAD, True),
         "query_key_mask": (N, N, QKS, False), "grouped_causal": (4, 2, None, True)}


def reference(q, k, v, mask, causal, scale):
    """Float64 numpy: softmax of the scaled logits over the keys a query may see, the key heads over their groups."""
    q, k, v = (np.asarray(t, np.float64) for t in (q, k, v))
    k, v = (np.repeat(t, q.shape[2] // t.shape[2], axis=2) for t in (k, v))
    logits = np.einsum("btnh,bsnh->bnts", q, k) * scale
    keep = np.ones(logits.shape, bool) if mask is None else np.broadcast_to(mask, logits.shape)
    keep = keep & np.tril(np.ones(logits.shape[2:], bool)) if causal else keep
    logits = np.where(keep, logits, -np.inf)
    probs = np.exp(logits - logits.max(-1, keepdims=True))
    return np.einsum("bnts,bsnh->btnh", probs / probs.sum(-1, keepdims=True), v)


def composed(q, k, v, mask, causal, scale):
    """The unfused attention: einsums, a where and a softmax, each an op of its own."""
    group = q.shape[2] // k.shape[2]
    k, v = (ops.repeat(t, group, axis=2) for t in (k, v)) if group > 1 else (k, v)
    logits = ops.multiply(ops.einsum("btnh,bsnh->bnts", q, k), scale)
    keep = np.tril(np.ones((q.shape[1], k.shape[1]), bool)) if causal else None
    if mask is not None:
        keep = mask if keep is None else ops.logical_and(mask, keep)
    if keep is not None:
        logits = ops.where(keep, logits, -1e9)
    return ops.einsum("bnts,bsnh->btnh", ops.softmax(logits, axis=-1), v)


def op_names(blob):
    """The op names of the graph that makes ``blob``."""
    seen, todo, names = set(), [blob], []
    while todo:
        node = todo.pop().node
        if id(node) not in seen:
            seen.add(id(node))
            names.append(node.op.name)
            todo.extend(node.inputs)
    return names


@pytest.mark.parametrize("case", sorted(CASES))
def test_fused_equals_float64_and_keras(case):
    heads, kv_heads, mask, causal = CASES[case]
    q = RNG.normal(size=(B, T, heads, H)).astype(np.float32)
    k, v = (RNG.normal(size=(B, T, kv_heads, H)).astype(np.float32) for _ in range(2))
    inputs = [flow.Input((T, heads, H)), flow.Input((T, kv_heads, H)), flow.Input((T, kv_heads, H))]
    if mask is not None:
        inputs.append(flow.Input(mask.shape[1:], dtype="bool"))
    out = ops.dot_product_attention(*inputs[:3], mask=inputs[3] if mask is not None else None, is_causal=causal)
    assert op_names(out).count("dot_product_attention") == 1 and "softmax" not in op_names(out)
    got = flow.Model(inputs, out).predict([q, k, v] + ([mask] if mask is not None else []), verbose=0)
    np.testing.assert_allclose(got, reference(q, k, v, mask, causal, 1 / math.sqrt(H)), atol=1e-5)
    theirs = keras.ops.dot_product_attention(q, k, v, mask=mask, is_causal=causal)
    np.testing.assert_allclose(got, keras.ops.convert_to_numpy(theirs), atol=1e-5)


def model(case, attend):
    """Projections to heads, ``attend`` (fused or composed) and a projection back, by EinsumDense (Keras' kernel
    layout: the heads a dim of their own, which layout rules split over ``model``)."""
    heads, kv_heads, mask, causal = CASES[case]
    x = flow.Input((T, D))
    q = flow.layers.EinsumDense("btd,dnh->btnh", (T, heads, H), name="q")(x)
    k = flow.layers.EinsumDense("btd,dnh->btnh", (T, kv_heads, H), name="k")(x)
    v = flow.layers.EinsumDense("btd,dnh->btnh", (T, kv_heads, H), name="v")(x)
    m = None if mask is None else flow.Input(mask.shape[1:], dtype="bool")
    y = attend(q, k, v, m, causal, 1 / math.sqrt(H))
    out = flow.layers.EinsumDense("btnh,nhd->btd", (T, D), name="out")(y)
    net = flow.Model([x] if m is None else [x, m], out)
    net.compile(flow.optimizers.SGD(0.1), "mse")
    return net, [X] if m is None else [X, mask]


def fused(q, k, v, mask, causal, scale):
    out = ops.dot_product_attention(q, k, v, mask=mask, scale=scale, is_causal=causal)
    assert out.node.op.name == "dot_product_attention"                  # one op, the engine's fused kernel
    return out


HEADS_OVER_MODEL = {r"^(q|k|v)/kernel$": (None, "model", None), r"^out/kernel$": ("model", None, None)}

PLACES = {"one device": lambda: places.consistent(1, seed=3),
          "batch over 2": lambda: places.consistent(2, {"data": 2}, seed=3),
          "heads over model": lambda: places.consistent(4, {"data": 2, "model": 2}, HEADS_OVER_MODEL, seed=3),
          "mirrored x2": lambda: (places.consistent(1, seed=3), flow.config.set_view("mirrored"),
                                  flow.config.gpu_device_num(2))}


def trained(case, place, attend):
    PLACES[place]()
    net, feeds = model(case, attend)
    before, start = net.predict(feeds, verbose=0), net.get_weights()
    net.fit(feeds, Y, batch_size=B, epochs=3, shuffle=False, verbose=0)
    assert not any(np.allclose(a, b) for a, b in zip(start, net.get_weights()))       # every weight trained
    return net, before, {w.path: value for w, value in zip(net.weights, net.get_weights())}


@pytest.mark.slow
@pytest.mark.parametrize("case, place", [("causal", "one device"), ("causal_padding", "batch over 2"),
                                         ("padding", "mirrored x2"), ("query_key_mask", "heads over model"),
                                         ("grouped_causal", "heads over model")])
def test_fused_trains_as_composed(case, place):
    net, fused_out, fused_weights = trained(case, place, fused)
    _, composed_out, composed_weights = trained(case, place, composed)
    np.testing.assert_allclose(fused_out, composed_out, atol=1e-5)
    assert sorted(fused_weights) == sorted(composed_weights)
    for path, value in fused_weights.items():
        np.testing.assert_allclose(value, composed_weights[path], atol=1e-5, err_msg=path)
    if place == "heads over model":             # the heads reach the op split as the projections make them
        plan = net.parallel_plan(batch_size=B)
        assert plan.variables["q/kernel"].shard_shape == (D, CASES[case][0] // 2, H)
        forward = [(b.producer, b.collectives) for b in plan.boxing if b.phase == "forward"]
        assert forward == [("out/einsum", (("model", "all-reduce"),))], forward    # the only one: heads' sum


def mha(api):
    x, m = api.Input((T, D)), api.Input((T, T), dtype="bool")
    out = api.layers.MultiHeadAttention(num_heads=N, key_dim=H, name="attn")(x, x, attention_mask=m,
                                                                              use_causal_mask=True)
    return api.Model([x, m], out), out


def test_multi_head_attention_fuses_where_keras_does_and_equals_it():
    ours, out = mha(flow)
    assert op_names(out).count("dot_product_attention") == 1 and "softmax" not in op_names(out)
    theirs, _ = mha(keras)
    theirs.set_weights(ours.get_weights())
    feeds = [X, QKS[:, 0]]
    got = ours.predict(feeds, verbose=0)
    np.testing.assert_allclose(got, theirs.predict(feeds, verbose=0), atol=1e-5)
    flow.clear_session()
    scored = flow.layers.MultiHeadAttention(num_heads=N, key_dim=H, name="attn")
    x, m = flow.Input((T, D)), flow.Input((T, T), dtype="bool")
    out, scores = scored(x, x, attention_mask=m, use_causal_mask=True, return_attention_scores=True)
    assert "dot_product_attention" not in op_names(out)          # scores asked for: Keras' composed form
    composed_model = flow.Model([x, m], out)
    composed_model.set_weights(ours.get_weights())
    np.testing.assert_allclose(composed_model.predict(feeds, verbose=0), got, atol=1e-5)


def test_flash_attention_true_is_refused_where_no_flash_kernel_runs():
    if flow.config.backend_name() == "jax":
        jax = pytest.importorskip("jax")
        if jax.default_backend() == "gpu":
            pytest.skip("a GPU runs cuDNN's flash attention")
    q = flow.Input((T, N, H))
    refused = flow.Model(q, ops.dot_product_attention(q, q, q, flash_attention=True))
    feed = RNG.normal(size=(B, T, N, H)).astype(np.float32)
    with pytest.raises(flow.EngineError, match=r"flash_attention=True.*(no flash attention kernel|cuDNN)"):
        refused.predict(feed, verbose=0)
    plain = flow.Model(q, ops.dot_product_attention(q, q, q, flash_attention=False))
    np.testing.assert_allclose(plain.predict(feed, verbose=0), reference(feed, feed, feed, None, False,
                                                                         1 / math.sqrt(H)), atol=1e-5)


def test_mixed_bfloat16_computes_as_keras():
    """bfloat16 query, key and value: the logits and softmax in float32, the probabilities in bfloat16 (Keras)."""
    q, k, v = (RNG.normal(size=(B, T, N, H)).astype(np.float32) for _ in range(3))
    inputs = [flow.Input((T, N, H), dtype="bfloat16") for _ in range(3)]
    out = ops.dot_product_attention(*inputs, is_causal=True)
    assert out.dtype == flow.bfloat16 and out.node.op.name == "dot_product_attention"
    got = np.asarray(flow.Model(inputs, ops.cast(out, "float32")).predict([q, k, v], verbose=0))
    theirs = keras.ops.dot_product_attention(*(keras.ops.cast(t, "bfloat16") for t in (q, k, v)), is_causal=True)
    want = keras.ops.convert_to_numpy(keras.ops.cast(theirs, "float32"))
    np.testing.assert_allclose(got, want, atol=2e-2)
    assert np.abs(got - reference(q, k, v, None, True, 1 / math.sqrt(H))).max() > 1e-6     # bfloat16 rounding
