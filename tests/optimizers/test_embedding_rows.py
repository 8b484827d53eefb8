"""An embedding's rows are updated by the dense rule, whatever ids repeat in the batch: one Adam step equals numpy's
float64 Adam of the summed gradient rows (as Keras on JAX does; Keras on TensorFlow takes each occurrence of a row
into the second moment apart, so a row seen k times moves further)."""
import numpy as np
import pytest

import flowlayers as flow

IDS = np.array([[1, 1, 1, 4], [4, 7, 1, 0]], np.int32)     # row 1 four times, row 4 twice


@pytest.mark.parametrize("view, n", [("mirrored", 1), ("mirrored", 2), ("consistent", 2)])
def test_one_adam_step_on_repeated_rows_is_the_dense_rule(view, n):
    flow.config.set_view(view)
    flow.config.gpu_device_num(n)
    ids = flow.Input((4,), dtype="int32")
    model = flow.Model(ids, flow.layers.Embedding(10, 3)(ids))
    lr, b1, b2, eps = 0.1, 0.9, 0.999, 1e-7
    model.compile(flow.optimizers.Adam(lr, b1, b2, eps), "mse")
    table = model.get_weights()[0].astype(np.float64)
    target = np.zeros((2, 4, 3), np.float32)
    model.fit(IDS, target, batch_size=2, verbose=0)
    grad = np.zeros_like(table)     # d mean((E[ids] - 0)^2) / dE: every occurrence's term added into its row
    np.add.at(grad, IDS.reshape(-1), 2.0 * table[IDS.reshape(-1)] / target.size)
    m, v = (1 - b1) * grad, (1 - b2) * grad ** 2
    want = table - lr * np.sqrt(1 - b2) / (1 - b1) * m / (np.sqrt(v) + eps)
    np.testing.assert_allclose(model.get_weights()[0], want, rtol=1e-5, atol=1e-6)
