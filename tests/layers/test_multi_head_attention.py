"""MultiHeadAttention against Keras 3's: the same weight paths, shapes and order, the same outputs and attention
scores (self- and cross-attention, causal mask, an attention_mask input, its output_shape and value_dim), the
same training, in every view and device count; and saved and loaded whole."""
import keras
import numpy as np
import pytest

import flowlayers as flow

RNG = np.random.default_rng(6)
X = RNG.normal(size=(4, 5, 8)).astype(np.float32)
C = RNG.normal(size=(4, 3, 6)).astype(np.float32)                  # a context of another length and width
MASK = (RNG.random((4, 5, 3)) > 0.3).astype(np.int32)
MASK[:, :, 0] = 1                                                  # every query sees something
TARGET = RNG.normal(size=(4, 5, 8)).astype(np.float32)


def self_attention(api, **kw):
    x = api.Input((5, 8))
    mha = api.layers.MultiHeadAttention(num_heads=2, key_dim=4, name="attn", **kw)
    return api.Model(x, mha(x, x, use_causal_mask=True)), mha


def cross_attention(api):
    x, c, m = api.Input((5, 8)), api.Input((3, 6)), api.Input((5, 3), dtype="int32")
    mha = api.layers.MultiHeadAttention(num_heads=3, key_dim=2, value_dim=5, output_shape=7, name="cross")
    out, scores = mha(x, c, attention_mask=m, return_attention_scores=True)
    return api.Model([x, c, m], [out, scores]), mha


def test_weights_outputs_and_scores_are_keras():
    ours, ours_mha = cross_attention(flow)
    theirs, their_mha = cross_attention(keras)
    assert [(w.path, w.shape) for w in ours_mha.weights] == [(w.path, tuple(w.shape)) for w in their_mha.weights]
    theirs.set_weights(ours.get_weights())
    for got, want in zip(ours.predict([X, C, MASK], verbose=0), theirs.predict([X, C, MASK], verbose=0)):
        np.testing.assert_allclose(got, want, atol=2e-6)
    scores = ours.predict([X, C, MASK], verbose=0)[1]
    assert scores.shape == (4, 3, 5, 3) and np.all(scores[np.broadcast_to(MASK[:, None] == 0, scores.shape)] < 1e-6)


@pytest.mark.parametrize("view, n", [("mirrored", 1), ("mirrored", 2), ("consistent", 2)])
def test_causal_self_attention_trains_as_keras_does(view, n):
    flow.config.set_view(view)
    flow.config.gpu_device_num(n)
    ours, _ = self_attention(flow)
    theirs, _ = self_attention(keras)
    theirs.set_weights(ours.get_weights())
    got = ours.predict(X, verbose=0)
    np.testing.assert_allclose(got, theirs.predict(X, verbose=0), atol=2e-6)
    early = X.copy()
    early[:, 3:] = 0.0                                              # later steps changed: earlier outputs are not
    np.testing.assert_allclose(ours.predict(early, verbose=0)[:, :3], got[:, :3], atol=1e-6)
    for m, api in ((ours, flow), (theirs, keras)):
        m.compile(api.optimizers.SGD(0.1), "mse")
    np.testing.assert_allclose(ours.fit(X, TARGET, batch_size=2, epochs=2, shuffle=False, verbose=0).history["loss"],
                               theirs.fit(X, TARGET, batch_size=2, epochs=2, shuffle=False, verbose=0).history["loss"],
                               rtol=1e-5)
    for a, b in zip(ours.get_weights(), theirs.get_weights()):
        np.testing.assert_allclose(a, b, atol=1e-5)


def test_attention_with_dropout_is_the_same_in_every_view_and_saves_whole(tmp_path):
    """The dropout masks are the same in both views, so the weights are.  Adam's epsilon is 1e-5, not the default
    1e-7: the key bias has a true gradient of exactly zero (it shifts every score of a query alike, which softmax
    ignores), so what it gets is rounding noise that Adam divides by its own size; at 1e-7 the views' key biases
    part by 1.3e-5 on jax and 3.2e-6 on tensorflow, at 1e-5 by 8e-8 and 3e-8, every other weight by 3e-8 either
    way (measured; other masks, as on 2 mirrored replicas, part them by 3e-2)."""
    results = []
    for view, n in (("mirrored", 1), ("consistent", 2)):
        flow.config.set_view(view)
        flow.config.gpu_device_num(n)
        flow.clear_session()
        model, _ = self_attention(flow, dropout=0.25, seed=3)
        model.compile(flow.optimizers.Adam(0.01, epsilon=1e-5), "mse")
        model.fit(X, TARGET, batch_size=2, epochs=1, shuffle=False, verbose=0)
        results.append(model.get_weights())
    for a, b in zip(*results):
        np.testing.assert_allclose(a, b, atol=1e-5)
    model.save(tmp_path / "m")
    loaded = flow.models.load_model(tmp_path / "m")
    assert type(loaded.get_layer("attn")) is flow.layers.MultiHeadAttention
    np.testing.assert_array_equal(loaded.predict(X, verbose=0), model.predict(X, verbose=0))


@pytest.mark.parametrize("make, message", [
    (lambda: flow.layers.MultiHeadAttention(0, 4), r"num_heads expected a positive int, received 0"),
    (lambda: flow.layers.MultiHeadAttention(2, 4, attention_axes=(1,)), r"attention_axes=\(1,\) is not supported"),
    (lambda: flow.layers.MultiHeadAttention(2, 4)(flow.Input((5, 8))), r"expected mha\(query, value\)"),
    (lambda: flow.layers.MultiHeadAttention(2, 4)(flow.Input((5, 8)), flow.Input((5, 8)), query_mask=None),
     r"\['query_mask'\] not supported; expected query, value, key, attention_mask"),
    (lambda: flow.layers.MultiHeadAttention(2, 4)(flow.Input((8,)), flow.Input((8,))),
     r"query expected shape \(batch, seq, features\), received \(None, 8\)"),
])
def test_mistakes_are_named(make, message):
    with pytest.raises(flow.FlowLayersError, match=message):
        make()
