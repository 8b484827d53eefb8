"""``where`` whose condition has a lower rank than its split operands (a scalar reduced over the whole batch, as
Keras' hinge label check makes): on a 2-device mesh and on 2 replicas it computes what numpy does.  TensorFlow's
DTensor crashed the process (SIGSEGV) on a rank-0 condition beside operands split over the mesh."""
import numpy as np
import pytest

import flowlayers as flow
from flowlayers import ops

RNG = np.random.default_rng(5)
X = RNG.normal(size=(16, 4)).astype("float32")
BINARY, SIGNS = RNG.integers(0, 2, (16, 1)).astype("float32"), np.sign(RNG.normal(size=(16, 1))).astype("float32")


def signs_loss(y_true, y_pred):
    """Labels all 0 or 1 become -1/1 (the whole batch decides, a rank-0 condition), then a squared error."""
    binary = ops.all(ops.logical_or(ops.equal(y_true, 0.0), ops.equal(y_true, 1.0)))
    signs = ops.where(binary, ops.subtract(ops.multiply(y_true, 2.0), 1.0), y_true)
    return ops.mean(ops.square(ops.subtract(signs, y_pred)), axis=-1)


def _numpy_loss(x, y, kernel, bias, replicas):
    pred = x.astype(np.float64) @ kernel + bias
    parts = np.split(y.astype(np.float64), replicas)        # the mirrored view decides per replica, as Keras' does
    signs = np.concatenate([2 * p - 1 if np.isin(p, (0, 1)).all() else p for p in parts])
    return np.mean((signs - pred) ** 2)


@pytest.mark.parametrize("view", ["consistent", "mirrored"])
@pytest.mark.parametrize("labels", ["binary", "signs"])
def test_where_on_a_batch_wide_scalar_condition_is_numpy_where(view, labels):
    flow.config.set_view(view)
    flow.config.gpu_device_num(2)
    if view == "consistent":
        flow.config.set_mesh(data=2)
    x = flow.Input((4,))
    model = flow.Model(x, flow.layers.Dense(1)(x))
    model.compile("sgd", signs_loss)
    y = BINARY if labels == "binary" else SIGNS
    got = model.evaluate(X, y, batch_size=16, verbose=0)
    kernel, bias = model.get_weights()
    want = _numpy_loss(X, y, kernel, bias, 2 if view == "mirrored" else 1)
    assert abs(got - want) < 1e-5 * max(1.0, abs(want)), (got, want)
    history = model.fit(X, y, batch_size=8, epochs=2, verbose=0).history["loss"]
    assert np.all(np.isfinite(history))
