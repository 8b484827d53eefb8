"""OneFlow 0.x names with their documented signatures and defaults (0.3-0.5, the versions whose model I/O
flowlayers follows), checked against numpy float64."""
import numpy as np
import pytest

import flowlayers as flow
import flowlayers.typing as tp


def pool_job(op, **kwargs):
    flow.clear_default_session()

    @flow.global_function(type="predict")
    def job(x: tp.Numpy.Placeholder((2, 3, 4, 6))) -> tp.Numpy:
        return op(x, 2, 2, "VALID", **kwargs)
    return job


@pytest.mark.parametrize("op, reduce", [(flow.nn.max_pool2d, np.max), (flow.nn.avg_pool2d, np.mean)])
def test_pooling_defaults_to_nchw(op, reduce):
    x = np.random.default_rng(0).standard_normal((2, 3, 4, 6))
    expected = reduce(x.reshape(2, 3, 2, 2, 3, 2), axis=(3, 5))        # NCHW windows of 2x2
    np.testing.assert_allclose(pool_job(op)(x.astype(np.float32)), expected, rtol=1e-6, atol=1e-6)
    nhwc = pool_job(op, data_format="NHWC")(x.astype(np.float32))      # the same array read as NHWC: H 3, W 4
    expected = reduce(x[:, :2].reshape(2, 1, 2, 2, 2, 6), axis=(2, 4))  # VALID drops the third row
    np.testing.assert_allclose(nhwc, expected, rtol=1e-6, atol=1e-6)


def test_ceil_mode_is_refused_by_name():
    with pytest.raises(flow.LayerError, match=r"pool1: ceil_mode=True is not supported .* expected False"):
        pool_job(lambda x, *a: flow.nn.max_pool2d(x, *a, ceil_mode=True, name="pool1")).build()
    np.testing.assert_array_equal(pool_job(flow.nn.max_pool2d, ceil_mode=False)(np.ones((2, 3, 4, 6), np.float32)),
                                  np.ones((2, 3, 2, 3), np.float32))


def test_session_calls():
    job = pool_job(flow.nn.max_pool2d)
    job(np.zeros((2, 3, 4, 6), np.float32))
    assert flow.sync_default_session() is None          # every call has finished when it returns
    flow.clear_default_session()
    assert flow.get_all_variables() == {} and not flow.job.registered()
    flow.config.enable_legacy_model_io(True)
    assert flow.config.legacy_model_io_enabled()
    flow.config.enable_legacy_model_io()
    flow.config.enable_legacy_model_io(False)
    assert not flow.config.legacy_model_io_enabled()


BATCH = 8


def mlp_jobs(view, n):
    """OneFlow's asynchronous train job (tp.Callback) with a flow.watch on the logits, and a predict job."""
    flow.clear_default_session()
    flow.config.set_view(view)
    flow.config.gpu_device_num(n)
    seen = {"logits": []}

    def on_logits(logits: tp.Numpy):
        seen["logits"].append(logits)

    def net(images):
        h = flow.layers.dense(flow.reshape(images, [images.shape[0], -1]), 16, activation=flow.nn.relu,
                              name="hidden")
        return flow.layers.dense(h, 10, name="output")

    @flow.global_function(type="train")
    def train_job(images: tp.Numpy.Placeholder((BATCH, 1, 8, 8)),
                  labels: tp.Numpy.Placeholder((BATCH,), dtype=flow.int32)) -> tp.Callback[tp.Numpy]:
        logits = net(images)
        flow.watch(logits, on_logits)
        loss = flow.nn.sparse_softmax_cross_entropy_with_logits(labels, logits)
        flow.optimizer.SGD(flow.optimizer.PiecewiseConstantScheduler([], [0.1]), momentum=0).minimize(loss)
        return loss

    @flow.global_function(type="predict")
    def eval_job(images: tp.Numpy.Placeholder((BATCH, 1, 8, 8))) -> tp.Numpy:
        return net(images)

    return train_job, eval_job, seen


@pytest.mark.parametrize("view, n", [("mirrored", 1), ("consistent", 2), ("mirrored", 2)])
def test_asynchronous_jobs_deliver_each_result_in_order_and_watch_sees_each_step(view, n):
    train_job, eval_job, seen = mlp_jobs(view, n)
    (x, y), _ = flow.data.load_digits()
    x, y = x[:BATCH * 3], y[:BATCH * 3].astype(np.int32)
    delivered, logits_before = [], []
    for i in range(3):
        batch = slice(i * BATCH, (i + 1) * BATCH)
        logits_before.append(eval_job(x[batch]))
        train_job(x[batch], y[batch])(lambda loss, i=i: delivered.append((i, loss)))
    assert [i for i, _ in delivered] == [0, 1, 2]
    for i, loss in delivered:        # each step's loss, computed from the logits the step saw (numpy float64)
        logits = logits_before[i].astype(np.float64)
        log_softmax = logits - logits.max(1, keepdims=True)
        log_softmax -= np.log(np.exp(log_softmax).sum(1, keepdims=True))
        np.testing.assert_allclose(loss, -log_softmax[np.arange(BATCH), y[i * BATCH:(i + 1) * BATCH]], atol=1e-5)
        np.testing.assert_allclose(seen["logits"][i], logits_before[i], atol=1e-5)
    assert len(seen["logits"]) == 3


def test_asynchronous_job_errors_are_not_swallowed():
    train_job, _, _ = mlp_jobs("mirrored", 1)
    (x, y), _ = flow.data.load_digits()
    x, y = x[:BATCH], y[:BATCH].astype(np.int32)
    with pytest.raises(flow.InputError, match="placeholder 'images' expected shape"):
        train_job(x[:3], y)
    pending = train_job(x, y)

    def broken(loss):
        raise RuntimeError("the callback failed")
    with pytest.raises(RuntimeError, match="the callback failed"):
        pending(broken)
    with pytest.raises(flow.InputError, match="handed to a callback already"):
        pending(print)
    with pytest.raises(flow.InputError, match="expected a callable to receive the result, received 3"):
        train_job(x, y)(3)
    assert train_job.step == 2                  # the two accepted calls trained, the refused one did not


def test_list_list_numpy_gives_each_device_its_samples():
    flow.clear_default_session()
    flow.config.set_view("mirrored")
    flow.config.gpu_device_num(2)

    @flow.global_function(type="predict")
    def double(x: tp.ListNumpy.Placeholder((3, 2))) -> tp.ListListNumpy:
        return x * 2.0

    parts = [np.arange(6, dtype=np.float32).reshape(3, 2), -np.ones((3, 2), np.float32)]
    out = double(parts)
    assert len(out) == 2 and all(len(samples) == 3 for samples in out)
    for device, samples in zip(parts, out):
        for row, sample in zip(device, samples):
            np.testing.assert_array_equal(sample, row * 2.0)


@pytest.mark.parametrize("view", ["mirrored", "consistent"])
def test_a_placement_covering_the_devices_in_use_just_works(view):
    flow.clear_default_session()
    flow.config.set_view(view)
    flow.config.gpu_device_num(2)

    @flow.global_function(type="predict")
    def job(x: tp.Numpy.Placeholder((4, 3))) -> tp.Numpy:
        with flow.scope.placement("gpu", "0:0-1"):
            h = x * 2.0
        with flow.scope.placement("cpu", ["0:0", "0:1"]):
            return h + 1.0

    x = np.arange(12, dtype=np.float32).reshape(4, 3)
    np.testing.assert_array_equal(job(x), x * 2.0 + 1.0)


@pytest.mark.parametrize("view, args, message", [
    ("mirrored", ("gpu", "0:0"), r"placement\('gpu', '0:0'\): a placement on some of the 2 devices expected the "
                                 r"consistent view with a one-axis mesh, received the mirrored view"),
    ("consistent", ("gpu", "1:0-1"), r"expected devices of machine 0 among the 2 in use .* received \['1:0', '1:1'\]"),
    ("consistent", ("gpu", "0:1-2"), r"received \['0:2'\]"),
    ("consistent", ("tpu", "0:0-1"), "device_tag expected 'gpu' or 'cpu', received 'tpu'"),
    ("consistent", ("gpu", "0:3-1"), r"machine_device_ids expected 'machine:device' or 'machine:first-last'"),
    ("consistent", ("gpu", 0), "machine_device_ids expected"),
])
def test_placements_flowlayers_cannot_honour_are_named(view, args, message):
    flow.clear_default_session()
    flow.config.set_view(view)
    flow.config.gpu_device_num(2)

    @flow.global_function(type="predict")
    def job(x: tp.Numpy.Placeholder((4, 3))) -> tp.Numpy:
        with flow.scope.placement(*args):
            return x * 2.0

    with pytest.raises(flow.ConfigError, match=message):
        job(np.zeros((4, 3), np.float32))


@pytest.mark.parametrize("view, n", [("mirrored", 1), ("mirrored", 2), ("consistent", 2)])
def test_watch_diff_sees_the_loss_gradient_of_a_blob(view, n):
    """OneFlow 0.x's diff: d(summed cross-entropy)/d(logits) = softmax(logits) - one_hot(labels), in numpy
    float64 (no 1/batch factor, whatever the view and device count)."""
    flow.clear_default_session()
    flow.config.set_view(view)
    flow.config.gpu_device_num(n)
    seen = {"logits": [], "diff": []}

    @flow.global_function(type="train")
    def train_job(images: tp.Numpy.Placeholder((BATCH, 1, 8, 8)),
                  labels: tp.Numpy.Placeholder((BATCH,), dtype=flow.int32)) -> tp.Numpy:
        h = flow.layers.dense(flow.reshape(images, [BATCH, -1]), 16, activation=flow.nn.relu, name="hidden")
        logits = flow.layers.dense(h, 10, name="output")
        flow.watch(logits, lambda value: seen["logits"].append(value))
        flow.watch_diff(logits, lambda value: seen["diff"].append(value))
        loss = flow.nn.sparse_softmax_cross_entropy_with_logits(labels, logits)
        flow.optimizer.SGD(flow.optimizer.PiecewiseConstantScheduler([], [0.1]), momentum=0).minimize(loss)
        return loss

    (x, y), _ = flow.data.load_digits()
    for step in range(2):
        train_job(x[step * BATCH:(step + 1) * BATCH], y[step * BATCH:(step + 1) * BATCH].astype(np.int32))
    assert len(seen["diff"]) == 2
    for step, (logits, diff) in enumerate(zip(seen["logits"], seen["diff"])):
        z = logits.astype(np.float64)
        p = np.exp(z - z.max(1, keepdims=True))
        p /= p.sum(1, keepdims=True)
        expected = p - np.eye(10)[y[step * BATCH:(step + 1) * BATCH]]
        assert diff.shape == (BATCH, 10)
        np.testing.assert_allclose(diff, expected, atol=1e-6)


def test_watch_diff_is_a_train_job_s():
    flow.clear_default_session()

    @flow.global_function(type="predict")
    def job(x: tp.Numpy.Placeholder((2, 3))) -> tp.Numpy:
        flow.watch_diff(x, print)
        return x

    with pytest.raises(flow.GraphError, match=r"watch_diff: expected inside .*type='train'"):
        job(np.zeros((2, 3), np.float32))
