"""``predict`` on a model with a scalar (0-d) output: as Keras' TF trainer, one value per batch, stacked to
``(num_batches,)``; a single batch gives the scalar itself."""
import numpy as np
import pytest

import flowlayers as flow

X = np.arange(30, dtype=np.float32).reshape(10, 3)


@pytest.mark.parametrize("devices", [1, 2])
def test_scalar_per_batch(fresh, devices):
    flow.config.gpu_device_num(devices)
    flow.config.set_view("consistent")
    x = flow.Input((3,))
    model = flow.Model(x, [flow.math.reduce_sum(x), x * 2.0])

    total, doubled = model.predict(X, batch_size=4, verbose=0)       # batches of 4, 4 and 2 rows
    np.testing.assert_array_equal(total, [X[:4].sum(), X[4:8].sum(), X[8:].sum()])
    np.testing.assert_array_equal(doubled, X * 2.0)                  # batched outputs still concatenate

    single = flow.Model(x, flow.math.reduce_mean(x)).predict(X, batch_size=10, verbose=0)
    assert np.shape(single) == ()
    assert single == pytest.approx(X.mean())
