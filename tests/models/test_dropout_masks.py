"""The dropout masks training steps draw, as ``flow.watch`` sees them: a new mask each step, another on each
replica (mirrored view) and on each device's rows of a batch split over the mesh (consistent view), and the same
masks again for the same seed.  A mask repeated every step, or on every replica, trains on correlated noise
without any error."""
import numpy as np
import pytest

import flowlayers as flow
import flowlayers.typing as tp
from places import consistent

RATE, WIDTH, ROWS, STEPS = 0.5, 128, 2, 4       # ROWS per device


def masks(view, seed=0):
    """Per step, the dropout output of a batch of ones on each device: (devices, ROWS, WIDTH)."""
    if view == "consistent":
        consistent(2, {"data": 2}, seed=seed)
    else:
        flow.config.set_view("mirrored")
        flow.config.gpu_device_num(2)
        flow.clear_session()
        flow.config.set_seed(seed)
    flow.clear_default_session()
    seen = []
    mirrored = view == "mirrored"

    def on_dropped(value: tp.ListNumpy if mirrored else tp.Numpy):
        seen.append(np.stack(value) if mirrored else np.asarray(value).reshape(2, ROWS, WIDTH))

    @flow.global_function(type="train")
    def step(x: (tp.ListNumpy if mirrored else tp.Numpy).Placeholder((ROWS if mirrored else 2 * ROWS, WIDTH))
             ) -> tp.Numpy:
        dropped = flow.nn.dropout(x, rate=RATE, name="drop")
        flow.watch(dropped, on_dropped)
        loss = flow.math.reduce_mean(flow.layers.dense(dropped, 1, name="out"))
        flow.optimizer.SGD(flow.optimizer.PiecewiseConstantScheduler([], [0.1]), momentum=0).minimize(loss)
        return loss

    ones = np.ones((ROWS, WIDTH), np.float32)
    for _ in range(STEPS):
        step([ones, ones] if mirrored else np.concatenate([ones, ones]))
    return np.stack(seen)       # (steps, devices, ROWS, WIDTH)


@pytest.mark.parametrize("view", ["consistent", "mirrored"])
def test_each_step_draws_new_masks(view):
    drawn = masks(view)
    assert drawn.shape == (STEPS, 2, ROWS, WIDTH)
    assert set(np.unique(drawn)) == {0.0, 1.0 / (1.0 - RATE)}
    kept = (drawn != 0).mean(axis=-1)
    assert np.all((kept > 0.3) & (kept < 0.7)), kept
    for a in range(STEPS):
        for b in range(a + 1, STEPS):
            assert not np.array_equal(drawn[a] != 0, drawn[b] != 0), f"steps {a + 1} and {b + 1} drew one mask"


@pytest.mark.parametrize("view", ["consistent", "mirrored"])
def test_each_device_draws_other_masks_for_its_rows(view):
    for k, step in enumerate(masks(view)):
        rows = {tuple(row) for row in (step != 0).reshape(2 * ROWS, WIDTH)}
        assert len(rows) == 2 * ROWS, f"step {k + 1}: {2 * ROWS} rows on 2 devices drew {len(rows)} distinct masks"


@pytest.mark.parametrize("view", ["consistent", "mirrored"])
def test_the_masks_repeat_for_a_seed_and_change_with_another(view):
    first = masks(view, seed=3)
    np.testing.assert_array_equal(first, masks(view, seed=3))
    other = masks(view, seed=4)
    assert all(not np.array_equal(a != 0, b != 0) for a, b in zip(first, other))
