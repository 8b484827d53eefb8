"""ReversibleEmbedding against Keras 3's: weight paths and shapes, the lookup and the reverse projection (tied, untied,
soft-capped), and a training step through both ways, in every view; its mistakes named."""
import keras
import numpy as np
import pytest

import flowlayers as flow
from flowlayers.errors import LayerError, ShapeError

VOCAB, WIDTH, SEQ = 12, 6, 5


def language_model(api, **kwargs):
    """ids -> embedding -> tanh Dense -> back to the vocabulary through the same layer."""
    ids = api.Input((SEQ,), dtype="int32")
    table = api.layers.ReversibleEmbedding(VOCAB, WIDTH, name="tokens", embeddings_initializer="random_normal",
                                           **kwargs)
    h = api.layers.Dense(WIDTH, activation="tanh", name="mix")(table(ids))
    return api.Model(ids, table(h, reverse=True)), table


@pytest.mark.parametrize("view, n", [("mirrored", 1), ("mirrored", 2), ("consistent", 2)])
@pytest.mark.parametrize("kwargs", [{}, {"tie_weights": False}, {"logit_soft_cap": 1.5}],
                         ids=["tied", "untied", "soft-capped"])
def test_lookup_reverse_projection_and_a_step_are_keras(view, n, kwargs):
    flow.config.set_view(view)
    flow.config.gpu_device_num(n)
    (ours, our_layer), (theirs, their_layer) = language_model(flow, **kwargs), language_model(keras, **kwargs)
    assert [(w.path, w.shape) for w in our_layer.weights] == [(w.path, tuple(w.shape)) for w in their_layer.weights]
    theirs.set_weights(ours.get_weights())
    rng = np.random.default_rng(0)
    ids = rng.integers(0, VOCAB, (8, SEQ)).astype(np.int32)
    np.testing.assert_allclose(ours.predict(ids, verbose=0), theirs.predict(ids, verbose=0), atol=1e-6)
    for m, api in ((ours, flow), (theirs, keras)):      # SGD: Keras' Adam treats the lookup's sparse gradient apart
        m.compile(api.optimizers.SGD(0.5), api.losses.SparseCategoricalCrossentropy(from_logits=True))
        m.train_on_batch(ids, np.roll(ids, -1, axis=1))
    for w, a, b in zip(ours.weights, ours.get_weights(), theirs.get_weights()):
        np.testing.assert_allclose(a, b, atol=1e-6, err_msg=w.path)


@pytest.mark.parametrize("make, error, message", [
    (lambda: flow.layers.ReversibleEmbedding(VOCAB, WIDTH, mask_zero=True), LayerError,
     r"'reversible_embedding' \(ReversibleEmbedding\): mask_zero is not supported by flowlayers, received True"),
    (lambda: flow.layers.ReversibleEmbedding(VOCAB, WIDTH, logit_soft_cap=-1), LayerError,
     r"logit_soft_cap expected a positive number or None, received -1"),
    (lambda: flow.layers.ReversibleEmbedding(VOCAB, WIDTH, name="t")(flow.Input((WIDTH + 1,)), reverse=True),
     ShapeError, r"layer 't' \(ReversibleEmbedding\): reverse=True expected vectors of size 6 in the last dim, "
                 r"received shape \(None, 7\)"),
])
def test_mistakes_are_named(make, error, message):
    with pytest.raises(error, match=message):
        make()
