"""The split step is what keeps the consistent view exact (DESIGN.md, notes/dtensor_fused_update_bug.py).

A rule written the way Keras writes momentum — write the slot, then read it
back — is silently wrong in TF 2.21 DTensor when gradients and the update
share one tf.function.  The equivalence check below catches that when the
step is fused, and passes with the split step flowlayers uses.

The cause is DTensor's all-reduce combiner (DTENSOR_ENABLE_COMBINE_ALL_REDUCES_OPTIMIZATION, on by default):
with it off, which the TF backend sets on CPU meshes for speed, the fused step is exact too.  flowlayers keeps
the split step anyway: fused steps fail to compile under some layouts (a with_sbp constraint) and GPU meshes
keep the combiner.
"""
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import flowlayers as flow


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


@pytest.fixture(scope="module")
def data():
    (x, y), _ = flow.data.load_digits()
    return x[:320].reshape(320, -1), y[:320]


def diff(a, b):
    return max(float(np.abs(x - y).max()) for x, y in zip(a, b))


def test_split_step_is_exact(data):
    assert diff(train("mirrored", 1, data), train("consistent", 2, data)) < 1e-5


FUSED_RUN = """
import sys
sys.path.insert(0, {here!r})
import test_split_step as t
t.fuse_the_consistent_step()
data = t.data.__wrapped__()
print("DIFF", t.diff(t.train("mirrored", 1, data), t.train("consistent", 2, data)))
"""


def fuse_the_consistent_step():
    """Make the consistent view's gradient function also apply the update (then nothing is left to the split
    update step): the fused step DTensor gets wrong."""
    import tensorflow as tf
    from tensorflow.experimental import dtensor

    from flowlayers_tensorflow.consistent import ConsistentExecutable

    split_forward = ConsistentExecutable._forward

    def fused(self, plans, chunks, step):
        outs, grads, updates = split_forward(self, plans, chunks, step)
        p = self.program
        grads = [dtensor.relayout(g, self._handles[v.path].layout) for g, v in zip(grads, p.trainable)]
        updates = [dtensor.relayout(u, self._handles[v.path].layout) for u, (v, _) in zip(updates, p.updates)]
        lr = tf.constant(p.optimizer.current_learning_rate(), tf.float32)
        self._apply_copies(self._handles, grads, updates, lr, step)
        return outs, [], []

    ConsistentExecutable._forward = fused


def fused_diff(combine):
    """Weight difference of the fused consistent step from one device, in a process whose DTensor combines
    all-reduces or not (DTensor reads the setting once, when it first compiles)."""
    env = dict(os.environ, DTENSOR_ENABLE_COMBINE_ALL_REDUCES_OPTIMIZATION=combine, FLOWLAYERS_CPU_DEVICES="2")
    out = subprocess.run([sys.executable, "-c", FUSED_RUN.format(here=str(Path(__file__).parent))], env=env,
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    return float(out.stdout.split("DIFF")[-1])


@pytest.mark.tensorflow_backend     # TF DTensor's fused step
@pytest.mark.slow
def test_fused_step_is_caught_by_the_equivalence_check():
    assert fused_diff("1") > 1e-3          # DTensor's default


@pytest.mark.tensorflow_backend
@pytest.mark.slow
def test_all_reduce_combiner_is_what_breaks_the_fused_step():
    assert fused_diff("0") < 1e-5
