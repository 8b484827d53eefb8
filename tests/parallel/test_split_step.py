"""The split step is what keeps the consistent view exact (DESIGN.md, notes/dtensor_fused_update_bug.py).

A rule written the way Keras writes momentum — write the slot, then read it
back — is silently wrong in TF 2.21 DTensor when gradients and the update
share one tf.function.  The equivalence check below catches that when the
step is fused, and passes with the split step flowlayers uses.
"""
import numpy as np
import pytest

import flowlayers as flow
import flowlayers_tensorflow.consistent as consistent


class ReadAfterWriteMomentum(flow.optimizers.SGD):
    """Same arithmetic as SGD(momentum), but re-reads the slot variable after assigning it."""

    def update(self, xp, var, grad, slots, lr, step):
        (m,) = slots
        xp.assign(m, self.momentum * m - lr * grad)
        xp.assign(var, var + m)


def train(view, n, data):
    flow.config.set_view(view)
    flow.config.gpu_device_num(n)
    flow.clear_session()
    x = flow.Input((64,))
    model = flow.Model(x, flow.layers.Dense(10)(flow.layers.Dense(16, activation="relu")(x)))
    model.compile(optimizer=ReadAfterWriteMomentum(0.1, momentum=0.9),
                  loss=flow.losses.SparseCategoricalCrossentropy(from_logits=True))
    model.fit(*data, batch_size=32, epochs=1, shuffle=False, verbose=0)
    return model.get_weights()


@pytest.fixture
def fused(monkeypatch):
    monkeypatch.setattr(consistent, "FUSED_STEP", True)


@pytest.fixture(scope="module")
def data():
    (x, y), _ = flow.data.load_digits()
    return x[:320].reshape(320, -1), y[:320]


def diff(a, b):
    return max(float(np.abs(x - y).max()) for x, y in zip(a, b))


def test_split_step_is_exact(data):
    assert diff(train("mirrored", 1, data), train("consistent", 2, data)) < 1e-5


def test_fused_step_is_caught_by_the_equivalence_check(data, fused):
    assert diff(train("mirrored", 1, data), train("consistent", 2, data)) > 1e-3
