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
    flow.clear_default_session()
    flow.config.gpu_device_num(devices)
    flow.config.set_view("consistent")
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
