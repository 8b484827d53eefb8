"""A group of ``steps_per_execution`` steps trains exactly as the same steps one by one, over several epochs.

The data is sized so that each epoch holds several full groups, then a smaller group, then a last batch of fewer
rows: the jax backend makes a group's rows on its devices from the first row the group before computed there, so
a wrong first row for the next group (or a wrong step number, which Adam and dropout read) shows here as other
weights.  Checked in both views on 2 devices, shuffled and not.
"""
import numpy as np
import pytest

import flowlayers as flow
from places import use

ROWS, BATCH, GROUP, EPOCHS = 300, 16, 4, 3     # 18 full batches an epoch: groups of 4, 4, 4, 4, 2, then 12 rows
RNG = np.random.default_rng(11)
X = RNG.normal(size=(ROWS, 12)).astype(np.float32)
Y = RNG.integers(0, 4, ROWS)


def trained(view, steps_per_execution, shuffle):
    use(view, 2, {"data": 2} if view == "consistent" else None, seed=5, fresh=True)
    x = flow.Input((12,))
    h = flow.layers.Dropout(0.25)(flow.layers.Dense(16, activation="relu", name="hidden")(x))
    model = flow.Model(x, flow.layers.Dense(4, name="out")(h))
    model.compile(flow.optimizers.Adam(0.01), flow.losses.SparseCategoricalCrossentropy(from_logits=True),
                  metrics=["accuracy"], steps_per_execution=steps_per_execution)
    history = model.fit(X, Y, batch_size=BATCH, epochs=EPOCHS, shuffle=shuffle, verbose=0)
    return model, history.history


@pytest.mark.slow
@pytest.mark.parametrize("shuffle", [False, True])
@pytest.mark.parametrize("view", ["consistent", "mirrored"])
def test_groups_of_steps_end_at_the_weights_of_single_steps_exactly(view, shuffle):
    one, logs_one = trained(view, 1, shuffle)
    grouped, logs_grouped = trained(view, GROUP, shuffle)
    assert one.optimizer.iterations == grouped.optimizer.iterations == EPOCHS * 19
    for a, b in zip(one.get_weights(), grouped.get_weights()):
        np.testing.assert_array_equal(a, b)
    for key in ("loss", "accuracy"):
        np.testing.assert_allclose(logs_one[key], logs_grouped[key], rtol=1e-6)
