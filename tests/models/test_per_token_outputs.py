"""Losses and metrics of per-token outputs (``(batch, seq, vocab)`` logits, ``(batch, seq)`` labels) average over
every token, as Keras reports them, in History, ``evaluate`` and the gradients, in every view; checked against
Keras 3 from the same weights.

SGD trains here: Keras 3's Adam on the TF backend updates an Embedding's rows from its sparse gradient so that
a token seen several times in a batch moves by up to 2.3x the learning rate in the first step (measured), which
dense Adam - flowlayers' and the rule as written - never does; SGD is the same either way."""
import keras
import numpy as np
import pytest

import flowlayers as flow

RNG = np.random.default_rng(4)
X = RNG.integers(0, 12, (16, 8)).astype(np.int32)
Y = RNG.integers(0, 12, (16, 8)).astype(np.int32)


def token_model(api):
    ids = api.Input((8,), dtype="int32")
    h = api.layers.Embedding(12, 6)(ids)
    return api.Model(ids, api.layers.Dense(12)(api.layers.Dense(10, activation="tanh")(h)))


@pytest.mark.parametrize("view, n", [("mirrored", 1), ("mirrored", 2), ("consistent", 2)])
def test_per_token_loss_and_accuracy_are_means_over_every_token_as_in_keras(view, n):
    flow.config.set_view(view)
    flow.config.gpu_device_num(n)
    ours, theirs = token_model(flow), token_model(keras)
    theirs.set_weights(ours.get_weights())
    for m, api in ((ours, flow), (theirs, keras)):
        m.compile(api.optimizers.SGD(0.1, momentum=0.9), api.losses.SparseCategoricalCrossentropy(from_logits=True),
                  metrics=["accuracy"])
    got, want = ours.evaluate(X, Y, verbose=0), theirs.evaluate(X, Y, verbose=0)
    assert got[0] < 3.0                        # about ln 12 per token, not 8 tokens' sum
    np.testing.assert_allclose(got, want, rtol=1e-5)
    got = ours.fit(X, Y, batch_size=8, epochs=2, shuffle=False, verbose=0).history
    want = theirs.fit(X, Y, batch_size=8, epochs=2, shuffle=False, verbose=0).history
    np.testing.assert_allclose(got["loss"], want["loss"], rtol=1e-5)
    np.testing.assert_allclose(got["accuracy"], want["accuracy"], atol=1e-6)
    for a, b in zip(ours.get_weights(), theirs.get_weights()):
        np.testing.assert_allclose(a, b, atol=2e-5)
