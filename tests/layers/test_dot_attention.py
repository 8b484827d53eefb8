"""Attention (dot and concat scores) and AdditiveAttention against Keras 3's: the same weights, outputs, attention
scores and SGD step, with a key, masks and a causal mask, on one device, two mirrored replicas and a 2x2 mesh."""
import keras
import numpy as np
import pytest

import flowlayers as flow
from keras_reference import compare, data

Q, V = (5, 4), (4, 4)
MASKS = [(5,), (4,)]


def _mask_data():
    x = data([Q, V, (5,), (4,)])
    x[2], x[3] = (x[2] > -1.0).astype(np.float32), (x[3] > -1.0).astype(np.float32)
    x[3][:, 0] = 1.0        # every query sees some value
    return x


CASES = {   # name: (layer, call on the inputs, input shapes)
    "Attention-dot": (lambda L: L.Attention(), None, [Q, V]),
    "Attention-dot-scaled-key": (lambda L: L.Attention(use_scale=True), None, [Q, (4, 2), V]),
    "Attention-concat": (lambda L: L.Attention(score_mode="concat"), None, [Q, V]),
    "Attention-concat-scaled": (lambda L: L.Attention(use_scale=True, score_mode="concat"), None, [Q, V]),
    "Attention-causal": (lambda L: L.Attention(use_scale=True), lambda layer, x: layer(x, use_causal_mask=True),
                         [(4, 4), V]),
    "Attention-masks": (lambda L: L.Attention(use_scale=True), lambda layer, x: layer(x[:2], mask=x[2:]),
                        [Q, V] + MASKS),
    "Attention-masks-pooled": (lambda L: L.Attention(use_scale=True), lambda layer, x: _pooled(layer(
        x[:2], mask=x[2:])), [Q, V] + MASKS),
    "AdditiveAttention": (lambda L: L.AdditiveAttention(), None, [Q, V]),
    "AdditiveAttention-unscaled-key": (lambda L: L.AdditiveAttention(use_scale=False), None, [Q, (4, 2), V]),
    "AdditiveAttention-masks-causal-pooled": (lambda L: L.AdditiveAttention(), lambda layer, x: _pooled(layer(
        x[:2], mask=x[2:], use_causal_mask=True)), [(4, 4), V, (4,), (4,)]),
}


def _pooled(out):
    """The mean over the query steps the output's mask keeps (Keras' GlobalAveragePooling1D takes the mask)."""
    return (flow if isinstance(out, flow.Blob) else keras).layers.GlobalAveragePooling1D()(out)


@pytest.mark.parametrize("name", sorted(CASES))
def test_attention_is_keras(name):
    make, call, shapes = CASES[name]
    x = _mask_data() if shapes[2:] == MASKS else None
    if name == "Attention-masks":       # the output carries the query mask: Keras' loss would skip masked steps
        x[2] = np.ones_like(x[2])
    if name == "AdditiveAttention-masks-causal-pooled":
        x = data(shapes)
        x[2], x[3] = (x[2] > -1.0).astype(np.float32), np.ones_like(x[3])
    scaled = name.startswith("AdditiveAttention") and "unscaled" not in name     # a scale vector to split
    rules = {"^additive_attention[^/]*/scale$": ("model",)} if scaled else None
    compare(lambda api: make(api.layers), shapes, x=x, call=call, rules=rules)


def test_attention_scores_are_keras():
    compare(lambda api: api.layers.Attention(use_scale=True), [Q, V],
            call=lambda layer, x: layer(x, return_attention_scores=True), places=("one", "2x2"))


def test_attention_dropout_drops_scores_while_training_only():
    q, v = flow.Input(Q), flow.Input(V)
    layer = flow.layers.Attention(dropout=0.5, seed=1)
    model = flow.Model([q, v], layer([q, v], return_attention_scores=True, training=True)[1])
    scores = model.predict(data([Q, V]), verbose=0)
    assert set(np.unique(np.round(scores[scores != 0] * 0 + 1))) == {1.0} and (scores == 0).mean() > 0.3
    inference = flow.Model([q, v], layer([q, v], return_attention_scores=True)[1])
    np.testing.assert_allclose(inference.predict(data([Q, V]), verbose=0).sum(-1), 1.0, rtol=1e-5)


@pytest.mark.parametrize("make, message", [
    (lambda q, v: flow.layers.Attention(score_mode="cosine"), r"score_mode expected 'dot' or 'concat', received "
                                                              r"'cosine'"),
    (lambda q, v: flow.layers.Attention()(q), r"expected a list \[query, value\] or \[query, value, key\]"),
    (lambda q, v: flow.layers.AdditiveAttention()([q, v, flow.Input((4, 2))]), r"expected query \(N, Tq, D\), value "
                                                                           r"\(N, Tv, Dv\) and key \(N, Tv, D\)"),
    (lambda q, v: flow.layers.Attention(dropout=1.5), r"dropout expected a number in \[0, 1\), received 1.5"),
])
def test_mistakes_are_named(make, message):
    with pytest.raises(flow.FlowLayersError, match=message):
        make(flow.Input(Q), flow.Input(V))
