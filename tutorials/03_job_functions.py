"""Job functions and Placeholders: OneFlow's face of flowlayers.

    python tutorials/03_job_functions.py                 # 2 devices, the consistent view
    python tutorials/03_job_functions.py --view mirrored --devices 4 --smoke

Before Keras-style models, OneFlow users wrote *job functions*: a Python
function whose arguments are typed as Placeholders, decorated with
``@flow.global_function``.  Calling it runs one step: numpy arrays in, numpy
arrays out.  flowlayers keeps that face beside the Keras one; both build the
same logical graph and run through the same engine.

This tutorial trains a small LeNet on scikit-learn's bundled digits with a
``train`` job, measures it with a ``predict`` job that shares its weights, and
shows what happens when a call does not match its Placeholders.
"""
import argparse
import sys
import time
from typing import Tuple

import numpy as np

import flowlayers as flow
import flowlayers.typing as tp

BATCH_SIZE = 100


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--view", choices=["consistent", "mirrored"], default="consistent",
                        help="the view the jobs run in; default consistent")
    parser.add_argument("--devices", type=int, default=2, help="devices to use (logical CPUs stand in); default 2")
    parser.add_argument("--smoke", action="store_true", help="train a few steps only (a wiring check)")
    return parser.parse_args(argv)


# The network, written with OneFlow's functional layers.  Each layer is named;
# the name is how its variables are found (``conv1/weight``...), so a second
# job function calling ``lenet`` uses the *same* weights, as OneFlow's
# ``get_variable`` does.
def lenet(images, verbose=False):
    initializer = flow.truncated_normal(0.1)
    conv1 = flow.layers.conv2d(images, 32, 3, padding="SAME", activation=flow.nn.relu,
                               kernel_initializer=initializer, name="conv1")
    # A Blob is a logical tensor without data: shape and dtype are known while
    # the graph is built, and in the consistent view so is its SBP.
    if verbose:
        print(f"  conv1: shape {conv1.shape}, dtype {conv1.dtype}, sbp {conv1.sbp}")
    pool1 = flow.nn.max_pool2d(conv1, ksize=2, strides=2, padding="SAME", name="pool1")
    conv2 = flow.layers.conv2d(pool1, 64, 3, padding="SAME", activation=flow.nn.relu,
                               kernel_initializer=initializer, name="conv2")
    pool2 = flow.nn.max_pool2d(conv2, ksize=2, strides=2, padding="SAME", name="pool2")
    flat = flow.reshape(pool2, [pool2.shape[0], -1])
    hidden = flow.layers.dense(flat, 128, activation=flow.nn.relu, kernel_initializer=initializer, name="hidden")
    logits = flow.layers.dense(hidden, 10, kernel_initializer=initializer, name="outlayer")
    if verbose:
        print(f"  logits: {logits}")
    return logits


def make_jobs(view, test_size, boundary):
    config = flow.function_config()
    config.default_logical_view(flow.scope.consistent_view() if view == "consistent" else flow.scope.mirrored_view())

    # A train job.  ``tp.Numpy.Placeholder`` is the *logical* batch: one array
    # of BATCH_SIZE images, whatever the device count.  The body runs once,
    # at the first call, to build the graph; later calls only run it.
    @flow.global_function(type="train", function_config=config)
    def train_job(images: tp.Numpy.Placeholder((BATCH_SIZE, 1, 8, 8), dtype=flow.float),
                  labels: tp.Numpy.Placeholder((BATCH_SIZE,), dtype=flow.int32)) -> tp.Numpy:
        print(f"  building train_job: images {images.shape} {images.dtype}, sbp {images.sbp}")
        logits = lenet(images, verbose=True)
        loss = flow.nn.sparse_softmax_cross_entropy_with_logits(labels, logits, name="loss")
        # The optimizer is declared inside the job: ``minimize`` makes it a train job.
        # The learning rate drops tenfold after ``boundary`` steps.
        lr = flow.optimizer.PiecewiseConstantScheduler([boundary], [0.03, 0.003])
        flow.optimizer.SGD(lr, momentum=0.9).minimize(loss)
        return loss                       # one loss per example: shape (BATCH_SIZE,)

    # A predict job over the whole test set at once.  Its batch (359) does not
    # divide over 2 or 4 devices; that is fine: when a fed batch does not
    # divide, the planner lays it out broadcast (every device sees all of it)
    # instead of split, and the result is exact either way.
    @flow.global_function(type="predict", function_config=config)
    def eval_job(images: tp.Numpy.Placeholder((test_size, 1, 8, 8), dtype=flow.float),
                 labels: tp.Numpy.Placeholder((test_size,), dtype=flow.int32)) -> Tuple[tp.Numpy, tp.Numpy]:
        print(f"  building eval_job: images {images.shape}")
        logits = lenet(images)
        loss = flow.nn.sparse_softmax_cross_entropy_with_logits(labels, logits)
        return flow.math.argmax(logits, axis=1), loss

    return train_job, eval_job


def main(argv=None):
    args = parse_args(argv)
    start = time.perf_counter()
    flow.config.gpu_device_num(args.devices)
    print(f"view: {args.view}, devices: {args.devices}")

    # Batches shaped for the Placeholders: (14, 100, 1, 8, 8) and (14, 100).
    (train_images, train_labels), _ = flow.data.load_digits(batch_size=BATCH_SIZE)
    _, (test_images, test_labels) = flow.data.load_digits()
    epochs = 1 if args.smoke else 8
    steps = 5 if args.smoke else epochs * len(train_images)
    train_job, eval_job = make_jobs(args.view, len(test_images), boundary=int(steps * 0.75))

    # OneFlow's ritual: give every variable its initial value.
    flow.train.CheckPoint().init()

    for step in range(steps):
        b = step % len(train_images)
        loss = train_job(train_images[b], train_labels[b])      # numpy in, numpy out: one step
        if step % 20 == 0 or step == steps - 1:
            print(f"step {step + 1:>4}: mean loss {loss.mean():.4f}")

    predictions, test_loss = eval_job(test_images, test_labels)
    accuracy = float((predictions == test_labels).mean())
    print(f"test loss: {test_loss.mean():.4f}, test accuracy: {accuracy:.4f}")

    # A call that does not match its Placeholders is refused before anything
    # runs, with an error that names the argument, the expected and the
    # received shape.  Every such error is a flow.FlowLayersError.
    try:
        train_job(train_images[0][:64], train_labels[0][:64])
    except flow.FlowLayersError as e:
        print(f"a batch of 64 for a Placeholder of 100 is refused:\n  {type(e).__name__}: {e}")
    # ... and nothing was changed by it: the job runs on as before.
    again, _ = eval_job(test_images, test_labels)
    print(f"predictions unchanged after the refused call: {bool((again == predictions).all())}")
    print(f"done in {time.perf_counter() - start:.1f}s")
    if not args.smoke and accuracy <= 0.9:
        sys.exit(f"test accuracy {accuracy:.4f} is not above 0.9: something is wrong with this installation")
    return accuracy


if __name__ == "__main__":
    main()
