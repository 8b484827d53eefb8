"""Model parallelism as OneFlow 0.x wrote it: ``flow.layers.dense(..., model_distribute=flow.distribute.split(0))``,
``flow.get_variable(..., distribute=...)`` and ``blob.with_distribute(...)``.  In the consistent view the
variables really are split (their shards read back from the engine) and training equals one device."""
import numpy as np
import pytest

import flowlayers as flow
import flowlayers.typing as tp
from flowlayers.framework.variable import store
from places import use

BATCH, STEPS = 16, 3


def job(hidden_distribute=None, own_distribute=None, out_distribute=None):
    flow.clear_default_session()
    flow.config.set_seed(3)

    @flow.global_function(type="train")
    def train_job(images: tp.Numpy.Placeholder((BATCH, 1, 8, 8)),
                  labels: tp.Numpy.Placeholder((BATCH,), dtype=flow.int32)) -> tp.Numpy:
        h = flow.reshape(images, [BATCH, -1])
        h = flow.layers.dense(h, 32, activation=flow.nn.relu, name="hidden", model_distribute=hidden_distribute)
        if out_distribute is not None:
            h = h.with_distribute(out_distribute)
        w = flow.get_variable("proj-weight", (32, 16), initializer=flow.random_uniform_initializer(-0.3, 0.3),
                              distribute=own_distribute)
        h = flow.nn.relu(flow.matmul(h, w))
        logits = flow.layers.dense(h, 10, name="output")
        loss = flow.nn.sparse_softmax_cross_entropy_with_logits(labels, logits)
        flow.optimizer.SGD(flow.optimizer.PiecewiseConstantScheduler([], [0.1]), momentum=0.9).minimize(loss)
        return loss
    return train_job


def train(view, n, **distribute):
    use(view, n)
    (x, y), _ = flow.data.load_digits()
    fn = job(**distribute)
    for i in range(STEPS):
        fn(x[i * BATCH:(i + 1) * BATCH], y[i * BATCH:(i + 1) * BATCH].astype(np.int32))
    return fn, {path: var.numpy() for path, var in store.variables.items()}


CASES = {
    "columns": ({"hidden_distribute": flow.distribute.split(0)}, {"hidden/kernel": (64, 16), "hidden/bias": (16,)}),
    "rows": ({"hidden_distribute": flow.distribute.split(1)}, {"hidden/kernel": (32, 32), "hidden/bias": (32,)}),
    "get_variable": ({"own_distribute": flow.distribute.split(1)}, {"proj-weight": (32, 8)}),
    "with_distribute": ({"hidden_distribute": flow.distribute.split(0), "out_distribute": flow.distribute.broadcast()},
                        {"hidden/kernel": (64, 16)}),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_oneflow_model_parallelism_splits_and_equals_one_device(case):
    distribute, shards = CASES[case]
    _, reference = train("consistent", 1, **distribute)
    fn, weights = train("consistent", 2, **distribute)
    plan = fn.parallel_plan()
    for path, shard in shards.items():
        assert plan.variables[path].shard_shape == shard, (path, plan.variables[path])
        assert len(set(plan.variables[path].shard_shapes)) == 1
    assert plan.variables["output/kernel"].shard_shape == (16, 10)           # not distributed: whole
    for path, value in reference.items():
        np.testing.assert_allclose(weights[path], value, atol=1e-5, err_msg=path)
    if "out_distribute" not in distribute:      # a Blob constraint is the consistent view's, as with_sbp
        _, mirrored = train("mirrored", 2, **distribute)                    # the mirrored view keeps copies
        for path, value in reference.items():
            np.testing.assert_allclose(mirrored[path], value, atol=1e-5, err_msg=path)


@pytest.mark.parametrize("distribute, message", [
    ({"hidden_distribute": flow.distribute.split(2)}, r"model_distribute expected split\(0\), split\(1\) or broadcast"),
    ({"own_distribute": flow.distribute.split(2)}, r"variable 'proj-weight' \(flow.distribute.split\(2\)\): expected "
                                                   r"a split axis in \[0, 2\)"),
    ({"own_distribute": "split(0)"}, r"distribute: expected flow.distribute.split\(axis\), broadcast\(\) or auto\(\), "
                                     r"received 'split\(0\)'"),
])
def test_distribute_mistakes_are_named(distribute, message):
    use("consistent", 2)
    (x, y), _ = flow.data.load_digits()
    with pytest.raises(flow.SBPError, match=message):
        job(**distribute)(x[:BATCH], y[:BATCH].astype(np.int32))


def test_with_distribute_on_a_two_axis_mesh_asks_for_with_sbp():
    use("consistent", 4, {"data": 2, "model": 2})
    (x, y), _ = flow.data.load_digits()
    with pytest.raises(flow.SBPError, match=r"with_distribute\(flow.distribute.broadcast\(\)\): expected a one-axis "
                                            r"mesh, received the mesh axes \['data', 'model'\]; use blob.with_sbp"):
        job(out_distribute=flow.distribute.broadcast())(x[:BATCH], y[:BATCH].astype(np.int32))
