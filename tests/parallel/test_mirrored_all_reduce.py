"""The mirrored step's all-reduce, both ways: each tensor summed on the first device (logical CPU devices), and
collectives (GPUs; run here on logical CPU devices so they stay tested): one per large tensor, one packed per dtype
for the small ones.  Every device gets the exact sum of every position, whatever its shape, size and dtype."""
import numpy as np
import pytest

import flowlayers as flow
from flowlayers import engine

tf = pytest.importorskip("tensorflow")     # the imports below need it: without it the file is skipped
from flowlayers_tensorflow.collectives import PACK_BYTES  # noqa: E402

pytestmark = pytest.mark.tensorflow_backend

SHAPES = [(), (3,), (2, 5), (4, 1, 3), (256, 300)]     # the last is past PACK_BYTES: reduced alone


@pytest.mark.parametrize("n", [2, 4])
@pytest.mark.parametrize("how", ["all_reduce", "collective_all_reduce"])
def test_every_device_gets_the_sum(n, how):
    assert 256 * 300 * 4 >= PACK_BYTES > 5 * 4
    flow.config.set_view("mirrored")
    flow.config.gpu_device_num(n)
    runtime = engine.runtime(engine.placement())
    rng = np.random.default_rng(n)
    values = [[rng.standard_normal(s).astype(np.float32) for s in SHAPES] + [rng.standard_normal(7)]
              for _ in range(n)]

    @tf.function(autograph=False)
    def reduce():
        placed = []
        for device, row in zip(runtime.devices, values):
            with tf.device(device):
                placed.append([tf.identity(tf.constant(v)) for v in row])
        return getattr(runtime, how)(placed)

    out = reduce()
    assert len(out) == n
    for row in out:
        for j, got in enumerate(row):
            want = sum(v[j].astype(np.float64) for v in values)
            assert got.dtype == values[0][j].dtype and got.shape == values[0][j].shape
            np.testing.assert_allclose(got.numpy(), want, rtol=1e-6, atol=1e-6)
