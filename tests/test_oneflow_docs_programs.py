"""Programs in the style of OneFlow 0.x's documentation, with only their imports changed: the quick start (LeNet
trained with ``load_mnist(BATCH_SIZE, BATCH_SIZE)``, saved, loaded and evaluated by a job returning
``tp.Callback``), the MLP trained with Adam, and the hybrid-parallel MLP and LeNet of its consistent-view page
(convolutions data parallel, dense layers split with ``model_distribute``).  Each checks what its original
promises: the loss falls, the accuracy, the same accuracy after loading, layers really split, and equal to one
device."""
import os
from typing import Tuple

import numpy as np
import pytest

import flowlayers as flow
import flowlayers.typing as tp
from flowlayers.framework.variable import store
from places import use

BATCH_SIZE = 100


@pytest.fixture
def mnist_here(tmp_path, shared_data, monkeypatch):
    """A working directory holding the MNIST IDX files, where ``load_mnist`` looks first (its out_dir='.')."""
    for name in os.listdir(shared_data):
        os.symlink(shared_data / name, tmp_path / name)
    monkeypatch.chdir(tmp_path)
    return tmp_path


# The quick start --------------------------------------------------------------------------------------------
def lenet(data, train=False, dense_distribute=None):
    initializer = flow.truncated_normal(0.1)
    conv1 = flow.layers.conv2d(data, 32, 5, padding="SAME", activation=flow.nn.relu, name="conv1",
                               kernel_initializer=initializer)
    pool1 = flow.nn.max_pool2d(conv1, ksize=2, strides=2, padding="SAME", name="pool1", data_format="NCHW")
    conv2 = flow.layers.conv2d(pool1, 64, 5, padding="SAME", activation=flow.nn.relu, name="conv2",
                               kernel_initializer=initializer)
    pool2 = flow.nn.max_pool2d(conv2, ksize=2, strides=2, padding="SAME", name="pool2", data_format="NCHW")
    reshape = flow.reshape(pool2, [pool2.shape[0], -1])
    hidden = flow.layers.dense(reshape, 512, activation=flow.nn.relu, kernel_initializer=initializer,
                               name="dense1", model_distribute=dense_distribute)
    if train:
        hidden = flow.nn.dropout(hidden, rate=0.5, name="dropout")
    return flow.layers.dense(hidden, 10, kernel_initializer=initializer, name="dense2",
                             model_distribute=dense_distribute)


def quickstart_jobs():
    @flow.global_function(type="train")
    def train_job(images: tp.Numpy.Placeholder((BATCH_SIZE, 1, 28, 28), dtype=flow.float),
                  labels: tp.Numpy.Placeholder((BATCH_SIZE,), dtype=flow.int32)) -> tp.Numpy:
        with flow.scope.placement("gpu", "0:0"):
            logits = lenet(images, train=True)
            loss = flow.nn.sparse_softmax_cross_entropy_with_logits(labels, logits, name="softmax_loss")
        lr_scheduler = flow.optimizer.PiecewiseConstantScheduler([], [0.1])
        flow.optimizer.SGD(lr_scheduler, momentum=0).minimize(loss)
        return loss

    @flow.global_function(type="predict")
    def eval_job(images: tp.Numpy.Placeholder((BATCH_SIZE, 1, 28, 28), dtype=flow.float),
                 labels: tp.Numpy.Placeholder((BATCH_SIZE,), dtype=flow.int32)) -> tp.Callback[Tuple[tp.Numpy,
                                                                                                   tp.Numpy]]:
        with flow.scope.placement("gpu", "0:0"):
            logits = lenet(images, train=False)
            loss = flow.nn.sparse_softmax_cross_entropy_with_logits(labels, logits, name="softmax_loss")
        return (labels, logits)
    return train_job, eval_job


def evaluate(eval_job, test_images, test_labels):
    g_total, g_correct = [0], [0]

    def acc(arguments):
        labels, logits = arguments
        predictions = np.argmax(logits, 1)
        g_correct[0] += np.sum(predictions == labels)
        g_total[0] += labels.shape[0]

    for images, labels in zip(test_images, test_labels):
        eval_job(images, labels)(acc)
    flow.sync_default_session()
    return g_correct[0] / g_total[0]


def test_quick_start_trains_saves_loads_and_evaluates(mnist_here):
    flow.config.gpu_device_num(1)
    train_job, eval_job = quickstart_jobs()
    (train_images, train_labels), (test_images, test_labels) = flow.data.load_mnist(BATCH_SIZE, BATCH_SIZE)
    assert train_images.shape == (100, BATCH_SIZE, 1, 28, 28)     # the test set doubles as the training set here
    losses = []
    for epoch in range(1):
        for i, (images, labels) in enumerate(zip(train_images[:60], train_labels[:60])):
            loss = train_job(images, labels)
            if i % 20 == 0:
                losses.append(loss.mean())
    assert losses[-1] < losses[0] / 2, losses
    accuracy = evaluate(eval_job, test_images[60:], test_labels[60:])     # batches training did not see
    assert accuracy > 0.8, accuracy
    flow.checkpoint.save("./lenet_models_1")

    flow.clear_default_session()                     # a new program: build the jobs, then load what was saved
    train_job, eval_job = quickstart_jobs()
    flow.load_variables(flow.checkpoint.get("./lenet_models_1"))
    assert evaluate(eval_job, test_images[60:], test_labels[60:]) == accuracy


# The MLP with Adam, and the hybrid-parallel MLP and LeNet ------------------------------------------------------
def mlp_job(distribute):
    @flow.global_function(type="train")
    def train_job(images: tp.Numpy.Placeholder((BATCH_SIZE, 1, 28, 28), dtype=flow.float),
                  labels: tp.Numpy.Placeholder((BATCH_SIZE,), dtype=flow.int32)) -> tp.Numpy:
        initializer = flow.truncated_normal(0.1)
        reshape = flow.reshape(images, [images.shape[0], -1])
        hidden = flow.layers.dense(reshape, 512, activation=flow.nn.relu, kernel_initializer=initializer,
                                   name="hidden")
        logits = flow.layers.dense(hidden, 10, kernel_initializer=initializer, name="output",
                                   model_distribute=distribute)
        loss = flow.nn.sparse_softmax_cross_entropy_with_logits(labels, logits, name="softmax_loss")
        lr_scheduler = flow.optimizer.PiecewiseConstantScheduler([], [0.001])
        flow.optimizer.Adam(lr_scheduler).minimize(loss)
        return loss
    return train_job


def lenet_job(distribute):
    @flow.global_function(type="train")
    def train_job(images: tp.Numpy.Placeholder((BATCH_SIZE, 1, 28, 28), dtype=flow.float),
                  labels: tp.Numpy.Placeholder((BATCH_SIZE,), dtype=flow.int32)) -> tp.Numpy:
        logits = lenet(images, train=False, dense_distribute=distribute)
        loss = flow.nn.sparse_softmax_cross_entropy_with_logits(labels, logits, name="softmax_loss")
        flow.optimizer.SGD(flow.optimizer.PiecewiseConstantScheduler([], [0.05]), momentum=0.9).minimize(loss)
        return loss
    return train_job


def train(make_job, devices, distribute, steps, images, labels):
    use("consistent", devices, fresh=True)
    job = make_job(distribute)
    losses = [float(job(images[i], labels[i]).mean()) for i in range(steps)]
    return job, losses, {path: var.numpy() for path, var in store.variables.items()}


@pytest.mark.parametrize("make_job, split", [
    (mlp_job, {"output/kernel": (512, 5), "output/bias": (5,)}),
    (lenet_job, {"dense1/kernel": (3136, 256), "dense1/bias": (256,), "dense2/kernel": (512, 5)}),
], ids=["mlp", "lenet"])
def test_hybrid_parallel_programs_split_their_dense_layers_and_equal_one_device(make_job, split, mnist_here):
    (images, labels), _ = flow.data.load_mnist(BATCH_SIZE, BATCH_SIZE)
    steps = 8 if make_job is mlp_job else 3
    _, one_losses, one_device = train(make_job, 1, flow.distribute.split(0), steps, images, labels)
    job, losses, two_devices = train(make_job, 2, flow.distribute.split(0), steps, images, labels)
    plan = job.parallel_plan()
    for path, shard in split.items():
        assert plan.variables[path].shard_shape == shard, (path, plan.variables[path])
    assert plan.variables["conv1/kernel" if make_job is lenet_job else "hidden/kernel"].sbp == (flow.sbp.B,)
    np.testing.assert_allclose(losses, one_losses, rtol=1e-4)
    for path, value in one_device.items():
        np.testing.assert_allclose(two_devices[path], value, atol=2e-5, err_msg=path)
    if make_job is mlp_job:
        assert losses[-1] < losses[0] * 0.6, losses


# watch_diff's page ---------------------------------------------------------------------------------------------
# The last row OneFlow's docs print for test_watch_diff.py (en/docs/extended_topics/watch_watch_diff.md): the
# gradient of the loss with respect to the logits, (100, 10) float32, after steps of training on MNIST.
DOCS_ROW = np.array([1.39966095e-03, 3.49164731e-03, 3.31605263e-02, 4.50417027e-03, 7.73609674e-04,
                     4.89911772e-02, 2.47627571e-02, 7.65468649e-05, -1.18361652e-01, 1.20161276e-03])


def watch_diff_job(seen):
    """The docs' test_watch_diff.py (a flow.watch of the logits added, so the test can compute the gradient)."""
    def watch_diff_handler(blob: tp.Numpy):
        seen["diff"].append(blob)

    @flow.global_function(type="train")
    def train_job(images: tp.Numpy.Placeholder((BATCH_SIZE, 1, 28, 28), dtype=flow.float),
                  labels: tp.Numpy.Placeholder((BATCH_SIZE,), dtype=flow.int32)) -> tp.Numpy:
        with flow.scope.placement("cpu", "0:0"):
            initializer = flow.truncated_normal(0.1)
            reshape = flow.reshape(images, [images.shape[0], -1])
            hidden = flow.layers.dense(reshape, 512, activation=flow.nn.relu, kernel_initializer=initializer,
                                       name="hidden")
            logits = flow.layers.dense(hidden, 10, kernel_initializer=initializer, name="output")
            loss = flow.nn.sparse_softmax_cross_entropy_with_logits(labels, logits)
        lr_scheduler = flow.optimizer.PiecewiseConstantScheduler([], [0.1])
        flow.optimizer.SGD(lr_scheduler, momentum=0).minimize(loss)
        flow.watch_diff(logits, watch_diff_handler)
        flow.watch(logits, lambda value: seen["logits"].append(value))
        return loss
    return train_job


@pytest.mark.slow
@pytest.mark.parametrize("view", ["consistent", "mirrored"])
def test_watch_diff_hands_the_docs_values(view, mnist_here):
    """What can be compared with the docs' printed row, and why not digit for digit: their weights were drawn by
    OneFlow's generator and trained on the MNIST training set for an unknown number of steps, so no run here makes
    their numbers.  What their row shows is the relation: softmax(logits) - one_hot(label) for one example, the
    gradient of that example's cross-entropy, with no 1/batch factor (OneFlow scales the variables' gradients by
    the loss instance number, not the Blobs').  The row sums to 0, its one negative entry is the label's, and it
    holds entries above 1/batch = 0.01, which a gradient of the batch mean cannot (each of its entries lies within
    1/batch).  So: the handler's value equals batch x the gradient of the mean loss, in numpy float64 from the
    watched logits, at every step; and the docs row and ours have the same sign pattern and order of magnitude."""
    label = int(np.argmin(DOCS_ROW))
    assert abs(DOCS_ROW.sum()) < 1e-6 and np.sum(DOCS_ROW < 0) == 1      # printed to 9 digits: sums to 6e-8
    assert np.abs(DOCS_ROW).max() > 1.0 / BATCH_SIZE
    use(view, 1, fresh=True)
    seen = {"diff": [], "logits": []}
    train_job = watch_diff_job(seen)
    (train_images, train_labels), _ = flow.data.load_mnist(BATCH_SIZE)
    steps = 30
    losses = [train_job(images, labels).mean() for images, labels in zip(train_images[:steps], train_labels[:steps])]
    assert len(seen["diff"]) == steps and losses[-1] < losses[0]
    for step in (0, steps - 1):
        z = seen["logits"][step].astype(np.float64)
        p = np.exp(z - z.max(1, keepdims=True))
        p /= p.sum(1, keepdims=True)
        expected = p - np.eye(10)[train_labels[step]]
        diff = seen["diff"][step]
        assert diff.shape == (BATCH_SIZE, 10) and diff.dtype == np.float32
        np.testing.assert_allclose(diff, expected, atol=1e-6)
    row, row_label = seen["diff"][-1][-1], train_labels[steps - 1][-1]
    assert np.sum(row < 0) == 1 and np.argmin(row) == row_label, row        # the docs row's sign pattern
    np.testing.assert_allclose(row.sum(), 0.0, atol=1e-6)
    # the order of magnitude: an example of a trained model's batch, as the docs row, has its label's entry
    # within a decade of theirs (rows of examples still wrong reach -1; the median row is the comparable one)
    label_entries = -seen["diff"][-1][np.arange(BATCH_SIZE), train_labels[steps - 1]]
    assert 0.1 * -DOCS_ROW[label] < np.median(label_entries) < 10 * -DOCS_ROW[label], np.median(label_entries)
    assert np.abs(seen["diff"][-1]).max() > 1.0 / BATCH_SIZE


# The pipelined LeNet of the parallelism page -------------------------------------------------------------------
def pipelined_lenet(data, train=False, first="0:0", second="0:1"):
    """The docs' hybrid_parallelism_lenet.py: the hidden layer on device 0, the dropout on all devices between,
    the output layer on device 1 (``first``/``second`` "0:0" both: the same model on one device)."""
    initializer = flow.truncated_normal(0.1)
    conv1 = flow.layers.conv2d(data, 32, 5, padding="SAME", activation=flow.nn.relu, kernel_initializer=initializer,
                               name="conv1")
    pool1 = flow.nn.max_pool2d(conv1, ksize=2, strides=2, padding="SAME", name="pool1")
    conv2 = flow.layers.conv2d(pool1, 64, 5, padding="SAME", activation=flow.nn.relu, kernel_initializer=initializer,
                               name="conv2")
    pool2 = flow.nn.max_pool2d(conv2, ksize=2, strides=2, padding="SAME", name="pool2")
    reshape = flow.reshape(pool2, [pool2.shape[0], -1])
    with flow.scope.placement("gpu", first):
        hidden = flow.layers.dense(reshape, 512, activation=flow.nn.relu, kernel_initializer=initializer,
                                   name="hidden")
    if train:
        hidden = flow.nn.dropout(hidden, rate=0.5)
    with flow.scope.placement("gpu", second):
        output = flow.layers.dense(hidden, 10, kernel_initializer=initializer, name="outlayer")
    return output


def pipelined_job(devices):
    second = "0:1" if devices == 2 else "0:0"

    @flow.global_function(type="train")
    def train_job(images: tp.Numpy.Placeholder((BATCH_SIZE, 1, 28, 28), dtype=flow.float),
                  labels: tp.Numpy.Placeholder((BATCH_SIZE,), dtype=flow.int32)) -> tp.Numpy:
        logits = pipelined_lenet(images, train=True, second=second)
        loss = flow.nn.sparse_softmax_cross_entropy_with_logits(labels, logits, name="softmax_loss")
        lr_scheduler = flow.optimizer.PiecewiseConstantScheduler([], [0.1])
        flow.optimizer.SGD(lr_scheduler, momentum=0).minimize(loss)
        return loss
    return train_job


@pytest.mark.slow
def test_pipelined_lenet_with_ops_between_and_after_its_placements_equals_one_device(mnist_here):
    """The dropout runs on all devices between the two placements and the loss on all devices after them (the
    tensors go from all devices to device 0, back to all, to device 1 and back): 5 steps on two devices give the
    losses and weights of the same model on one device (within 1e-5), each dense layer held by its device only."""
    (images, labels), _ = flow.data.load_mnist(BATCH_SIZE, BATCH_SIZE)
    results = []
    for devices in (1, 2):
        use("consistent", devices, seed=0, fresh=True)
        job = pipelined_job(devices)
        losses = [float(job(images[i], labels[i]).mean()) for i in range(5)]
        results.append((losses, {path: var.numpy() for path, var in store.variables.items()}))
    (one_losses, one), (losses, two) = results
    np.testing.assert_allclose(losses, one_losses, rtol=1e-5)
    assert losses[-1] < losses[0], losses
    for path, value in one.items():
        np.testing.assert_allclose(two[path], value, atol=1e-5, err_msg=path)
    held = {path: v.devices for path, v in job.parallel_plan().variables.items()}
    assert held["hidden/kernel"] == held["hidden/bias"] == (0,)
    assert held["outlayer/kernel"] == held["outlayer/bias"] == (1,)
    assert held["conv1/kernel"] == (0, 1)
