"""How the consistent view groups a step's all-reduces on CPU meshes (consistent.py, ``_all_reduce_group_size``).

DTensor reads its all-reduce group size each time it compiles a function: flowlayers sets it per step, all of a
step's all-reduces in one collective when its gradients are small on average (a deep narrow MLP), each in its own
when they are large.  A group size the user set stands.  Grouped or not, a step computes one device's weights.
"""
import collections
import glob
import os

import numpy as np
import pytest

import flowlayers as flow
from places import use

tf = pytest.importorskip("tensorflow")     # the imports below need it: without it the file is skipped
from tensorflow.tsl.profiler.protobuf import xplane_pb2  # noqa: E402
from flowlayers_tensorflow.consistent import GROUP_SIZE, all_reduce_grouping  # noqa: E402

pytestmark = pytest.mark.tensorflow_backend


def mlp(depth, width, inputs=16):
    flow.clear_session()
    x = h = flow.Input((inputs,))
    for _ in range(depth):
        h = flow.layers.Dense(width, activation="relu")(h)
    model = flow.Model(x, flow.layers.Dense(3)(h))
    model.compile(optimizer=flow.optimizers.SGD(0.1, momentum=0.9),
                  loss=flow.losses.SparseCategoricalCrossentropy(from_logits=True))
    return model


@pytest.fixture
def data():
    rng = np.random.default_rng(0)
    return rng.random((32, 16), dtype=np.float32), rng.integers(0, 3, 32)


def collectives(model, data, tmp_path):
    """How many all-reduces the devices ran during an epoch of ``model``, one per device per collective, as TF's
    profiler saw them.  The profiler may miss an event (under load, 107 of 108 were once seen), so callers compare
    counts with a margin far below the difference they test; the weights are read before the profiler stops, so
    no step is still running then."""
    tf.profiler.experimental.start(str(tmp_path))
    try:
        model.fit(*data, batch_size=16, epochs=1, verbose=0)
        model.get_weights()
    finally:
        tf.profiler.experimental.stop()
    space = xplane_pb2.XSpace.FromString(open(glob.glob(f"{tmp_path}/**/*.xplane.pb", recursive=True)[0], "rb").read())
    ops = collections.Counter()
    for plane in space.planes:
        names = {k: v.name for k, v in plane.event_metadata.items()}
        for line in plane.lines:
            ops.update(names.get(e.metadata_id, "").split(":")[-1] for e in line.events)
    return ops["CollectiveReduceV2"]


def train(view, n, data):
    """The model after one epoch (batch 16: two steps)."""
    use(view, n)
    model = mlp(12, 8)
    model.fit(*data, batch_size=16, epochs=1, shuffle=False, verbose=0)
    return model


def group_size(model):
    return model.trainer.step("train").executable._group_size


def test_small_gradients_are_all_reduced_in_one_collective(data, tmp_path, monkeypatch):
    reference = train("mirrored", 1, data).get_weights()
    grouped = train("consistent", 2, data)
    monkeypatch.setenv(GROUP_SIZE, "1")         # the user's: each all-reduce apart
    apart = train("consistent", 2, data)
    for model in (grouped, apart):
        assert max(float(np.abs(a - b).max()) for a, b in zip(reference, model.get_weights())) < 1e-5
    assert group_size(grouped) == group_size(apart) == "0"
    monkeypatch.delenv(GROUP_SIZE)
    # a second epoch (compiled already), two steps on two devices: one collective a step (26 gradients and the
    # loss together) ...
    assert 1 <= collectives(grouped, data, tmp_path / "a") <= 2 * 2
    # ... or one per tensor (2 * 2 * 27 = 108; a tenth of them missed would still be far from 4)
    assert 2 * 2 * 27 * 0.9 <= collectives(apart, data, tmp_path / "b") <= 2 * 2 * 27


def test_large_gradients_are_all_reduced_apart():
    use("consistent", 2)
    model = mlp(1, 512, inputs=784)          # a 1.6 MB kernel: 0.4 MB per gradient on average
    model.fit(np.zeros((4, 784), np.float32), np.zeros(4, np.int64), batch_size=4, verbose=0)
    assert group_size(model) == "1"


def test_the_group_size_is_set_only_while_a_step_runs(monkeypatch):
    assert GROUP_SIZE not in os.environ
    with pytest.raises(RuntimeError), all_reduce_grouping("0"):
        assert os.environ[GROUP_SIZE] == "0"
        raise RuntimeError("a failed step")
    assert GROUP_SIZE not in os.environ
    monkeypatch.setenv(GROUP_SIZE, "7")
    with all_reduce_grouping("0"):
        assert os.environ[GROUP_SIZE] == "7"    # the user's stands
    assert os.environ[GROUP_SIZE] == "7"
