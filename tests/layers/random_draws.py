"""What a random layer (noise, spatial dropout, augmentation) outputs in the training steps of a job, as
``flow.watch`` sees it: per step, the output for the same batch on each of 2 devices (mirrored replicas, or the
rows of a batch split over a consistent mesh)."""
import numpy as np

import flowlayers as flow
import flowlayers.typing as tp
from places import use

STEPS = 3


def draws(make, batch, view="mirrored", seed=0, steps=STEPS):
    """``make()``'s layer on ``batch`` (each device's rows), training: (steps, 2 devices, *batch.shape)."""
    mirrored = view == "mirrored"
    use(view, 2, None if mirrored else {"data": 2}, seed=seed, fresh=True)
    flow.clear_default_session()
    seen = []
    kind = tp.ListNumpy if mirrored else tp.Numpy
    rows = batch.shape[0]

    def on_output(value: kind):
        seen.append(np.stack(value) if mirrored else np.asarray(value).reshape((2,) + batch.shape))

    @flow.global_function(type="train")
    def step(x: kind.Placeholder(batch.shape if mirrored else (2 * rows,) + batch.shape[1:])) -> tp.Numpy:
        y = make()(x)
        flow.watch(y, on_output)
        loss = flow.math.reduce_mean(flow.layers.dense(flow.flatten(y), 1, name="out"))
        flow.optimizer.SGD(flow.optimizer.PiecewiseConstantScheduler([], [0.1]), momentum=0).minimize(loss)
        return loss

    for _ in range(steps):
        step([batch, batch] if mirrored else np.concatenate([batch, batch]))
    return np.stack(seen)


def differ_by_step_and_device_and_repeat(make, batch, view, same=np.array_equal):
    """Each step's draw differs from the others', each device's from the other's; a rerun of the same seed repeats
    them all, another seed does not."""
    first = draws(make, batch, view)
    for a in range(STEPS):
        assert not same(first[a, 0], first[a, 1]), f"step {a + 1}: both devices drew alike"
        for b in range(a + 1, STEPS):
            assert not same(first[a], first[b]), f"steps {a + 1} and {b + 1} drew alike"
    np.testing.assert_array_equal(first, draws(make, batch, view))
    other = draws(make, batch, view, seed=1)
    assert not same(first, other), "seeds 0 and 1 drew alike"
    return first
