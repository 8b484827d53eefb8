"""Layout rules changed between two fits: checked again before any variable moves, and applied when valid.

A rule that matches nothing is refused with the weights untouched; a valid new rule re-lays out the trained
variables (each device then holds its shard) and training continues to the weights one device reaches.
"""
import numpy as np
import pytest

import flowlayers as flow
from places import shards


def model():
    flow.clear_session()
    x = flow.Input((8,))
    out = flow.layers.Dense(3, name="head")(flow.layers.Dense(4, name="hidden")(x))
    m = flow.Model(x, out)
    m.compile(flow.optimizers.SGD(0.1, momentum=0.9), flow.losses.SparseCategoricalCrossentropy(from_logits=True))
    return m


def test_rules_set_after_training_are_checked_then_applied():
    rng = np.random.default_rng(0)
    x, y = rng.random((32, 8), dtype=np.float32), np.arange(32, dtype=np.int32) % 3
    flow.config.set_view("mirrored")
    flow.config.gpu_device_num(1)
    reference = model()
    for _ in range(3):
        reference.fit(x, y, batch_size=8, verbose=0, shuffle=False)

    flow.config.set_view("consistent")
    flow.config.gpu_device_num(2)
    m = model()
    m.fit(x, y, batch_size=8, verbose=0, shuffle=False)
    trained = m.get_weights()
    flow.config.set_layout_rules({"nowhere/kernel": (None, "data")})
    with pytest.raises(flow.SBPError, match=r"'nowhere/kernel'.*at least one variable.*'hidden/kernel'"):
        m.fit(x, y, batch_size=8, verbose=0, shuffle=False)
    assert all(np.array_equal(a, b) for a, b in zip(m.get_weights(), trained))

    flow.config.set_layout_rules({"hidden/kernel": (None, "data")})
    m.fit(x, y, batch_size=8, verbose=0, shuffle=False)
    kernel = m.get_layer("hidden").weights[0]
    assert shards(kernel) == [(8, 2), (8, 2)]
    m.fit(x, y, batch_size=8, verbose=0, shuffle=False)
    for a, b in zip(m.get_weights(), reference.get_weights()):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)
