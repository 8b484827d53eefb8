"""Consistent vs. mirrored: two views of the same devices, and the one line that switches them.

    python tutorials/02_consistent_vs_mirrored.py                  # 2 devices, bundled digits
    python tutorials/02_consistent_vs_mirrored.py --devices 4 --smoke
    python tutorials/02_consistent_vs_mirrored.py --mnist-dir /path/to/mnist   # seed 000's own data

OneFlow's documentation ("Consistent & Mirrored View", seed 000 of this
project) teaches distributed training with two small MNIST programs.  This
tutorial runs both, as they were written, then trains one Keras-style model
three times -- on one device, in the mirrored view and in the consistent
view -- and shows that the weights come out the same.

* The **mirrored** view copies the model onto every device; each device gets
  its own slice of the batch and the gradients are averaged (data parallelism
  only, like ``tf.distribute.MirroredStrategy``, which runs it here).
* The **consistent** view treats all devices as one big device.  Every tensor
  is *logical*; how it lies on the devices is its SBP (split, broadcast,
  partial-sum), and the framework may split data, model, or both (it runs on
  TF DTensor here).

Data: scikit-learn's bundled 8x8 digits (nothing to download), or MNIST's idx
files if you point ``--mnist-dir`` at them.  ``--smoke`` trains a few steps.
"""
import argparse
import time

import numpy as np

import flowlayers as flow
import flowlayers.typing as tp


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--devices", type=int, default=2, help="devices to use (logical CPUs stand in); default 2")
    parser.add_argument("--mnist-dir", default=None,
                        help="a directory with MNIST's idx files (or mnist.npz); default: scikit-learn's digits")
    parser.add_argument("--smoke", action="store_true", help="train a few steps only (a wiring check)")
    return parser.parse_args(argv)


def load_data(mnist_dir, batch_size):
    """Batches ``(num_batches, batch_size, 1, H, W)`` and labels ``(num_batches, batch_size)``, as seed 000 uses."""
    if mnist_dir:
        (images, labels), _ = flow.data.load_mnist(batch_size, data_dir=mnist_dir)
        print(f"data: MNIST from {mnist_dir}, {images.shape[0]} batches of {batch_size}")
    else:
        (images, labels), _ = flow.data.load_digits(batch_size=batch_size)
        print(f"data: scikit-learn's digits, {images.shape[0]} batches of {batch_size}")
    return images, labels


# ---------------------------------------------------------------------------
# Part 1. Seed 000's mirrored program.
#
# ``tp.ListNumpy.Placeholder`` declares what ONE device receives: the caller
# cuts each batch into one piece per device and passes a list; the job returns
# a list too, one loss array per device.  The view is chosen per job function
# with ``function_config().default_logical_view(...)``.
# ---------------------------------------------------------------------------
def mirrored_program(images, labels, devices, steps):
    batch_size = images.shape[1]
    per_device = batch_size // devices
    config = flow.function_config()
    config.default_data_type(flow.float)
    config.default_logical_view(flow.scope.mirrored_view())

    @flow.global_function(type="train", function_config=config)
    def mirrored_train_job(
        images: tp.ListNumpy.Placeholder((per_device,) + images.shape[2:], dtype=flow.float),
        labels: tp.ListNumpy.Placeholder((per_device,), dtype=flow.int32),
    ) -> tp.ListNumpy:
        # Shapes here are per device: one replica's view of the world.
        print(f"  mirrored: images placeholder {images.shape} (one device's share)")
        initializer = flow.truncated_normal(0.1)
        reshape = flow.reshape(images, [images.shape[0], -1])
        hidden = flow.layers.dense(reshape, 512, activation=flow.nn.relu, kernel_initializer=initializer,
                                   name="dense1")
        logits = flow.layers.dense(hidden, 10, kernel_initializer=initializer, name="dense2")
        loss = flow.nn.sparse_softmax_cross_entropy_with_logits(labels, logits)
        lr_scheduler = flow.optimizer.PiecewiseConstantScheduler([], [0.1])
        flow.optimizer.SGD(lr_scheduler, momentum=0).minimize(loss)
        return loss

    losses = []
    for i in range(steps):
        # The program does the splitting itself: one piece of the batch per device.
        b = i % len(images)        # several passes over the data when steps > batches
        loss = mirrored_train_job(np.split(images[b], devices), np.split(labels[b], devices))
        losses.append(np.concatenate(loss).mean())   # a list, one array per device: together, the batch
    return losses


# ---------------------------------------------------------------------------
# Part 2. Seed 000's consistent program.
#
# ``tp.Numpy.Placeholder`` declares the LOGICAL batch: the whole of it, as if
# there were one device.  The framework splits it over the devices (its SBP is
# split(0) on the ``data`` mesh axis) and returns one logical loss array.
# ---------------------------------------------------------------------------
def lenet(data, train=False):
    initializer = flow.truncated_normal(0.1)
    conv1 = flow.layers.conv2d(data, 32, 5, padding="SAME", activation=flow.nn.relu,
                               kernel_initializer=initializer, name="conv1")
    pool1 = flow.nn.max_pool2d(conv1, ksize=2, strides=2, padding="SAME", name="pool1")
    conv2 = flow.layers.conv2d(pool1, 64, 5, padding="SAME", activation=flow.nn.relu,
                               kernel_initializer=initializer, name="conv2")
    pool2 = flow.nn.max_pool2d(conv2, ksize=2, strides=2, padding="SAME", name="pool2")
    reshape = flow.reshape(pool2, [pool2.shape[0], -1])
    hidden = flow.layers.dense(reshape, 512, activation=flow.nn.relu, kernel_initializer=initializer,
                               name="hidden")
    if train:
        hidden = flow.nn.dropout(hidden, rate=0.5)
    return flow.layers.dense(hidden, 10, kernel_initializer=initializer, name="outlayer")


def consistent_program(images, labels, steps):
    config = flow.function_config()
    config.default_logical_view(flow.scope.consistent_view())   # the default view; said here for clarity

    @flow.global_function(type="train", function_config=config)
    def consistent_train_job(
        images: tp.Numpy.Placeholder(images.shape[1:], dtype=flow.float),
        labels: tp.Numpy.Placeholder(labels.shape[1:], dtype=flow.int32),
    ) -> tp.Numpy:
        # Shapes here are logical: the whole batch.  The SBP says how it lies on the devices.
        print(f"  consistent: images placeholder {images.shape}, sbp {images.sbp} (the whole batch, split)")
        logits = lenet(images, train=True)
        loss = flow.nn.sparse_softmax_cross_entropy_with_logits(labels, logits, name="softmax_loss")
        lr_scheduler = flow.optimizer.PiecewiseConstantScheduler([], [0.1])
        flow.optimizer.SGD(lr_scheduler, momentum=0).minimize(loss)
        return loss

    # No splitting here: the whole batch goes in, the whole batch's losses come out.
    return [consistent_train_job(images[i % len(images)], labels[i % len(labels)]).mean() for i in range(steps)]


# ---------------------------------------------------------------------------
# Part 3. One Keras-style model, three places, one line apart.
#
# ``build_model`` never mentions devices.  Where it runs is decided by
# ``flow.config.set_view`` and ``flow.config.gpu_device_num`` alone.  The
# promise: switching them changes where the work runs, not the result.
# ``flow.clear_session()`` restarts layer naming, so each build has the same
# variable paths and hence the same initial values (they are drawn from the
# seed and the path, on whatever devices hold them).
# ---------------------------------------------------------------------------
def build_model():
    flow.clear_session()
    x = flow.Input((1, 8, 8))
    h = flow.layers.Conv2D(16, 3, padding="same", activation="relu", data_format="channels_first")(x)
    h = flow.layers.MaxPool2D(2, data_format="channels_first")(h)
    h = flow.layers.Flatten()(h)
    h = flow.layers.Dense(64, activation="relu")(h)
    model = flow.Model(x, flow.layers.Dense(10)(h))
    model.compile(optimizer=flow.optimizers.SGD(0.05, momentum=0.9),
                  loss=flow.losses.SparseCategoricalCrossentropy(from_logits=True), metrics=["accuracy"])
    return model


def train_in(view, devices, x, y, x_test, y_test, epochs):
    flow.config.set_view(view)             # <- the one line
    flow.config.gpu_device_num(devices)
    model = build_model()
    model.fit(x, y, batch_size=64, epochs=1, verbose=0)
    after_one_epoch = model.get_weights()
    model.fit(x, y, batch_size=64, epochs=epochs, initial_epoch=1, verbose=0)     # the other epochs, if any
    _, accuracy = model.evaluate(x_test, y_test, batch_size=128, verbose=0)
    return after_one_epoch, accuracy


def main(argv=None):
    args = parse_args(argv)
    start = time.perf_counter()
    flow.config.gpu_device_num(args.devices)

    print(f"== Part 1: seed 000's mirrored program on {args.devices} devices")
    images, labels = load_data(args.mnist_dir, batch_size=100)
    steps = 5 if args.smoke else 60
    losses = mirrored_program(images, labels, args.devices, steps)
    print(f"  loss: {losses[0]:.3f} at step 1 -> {losses[-1]:.3f} at step {steps}")

    print(f"== Part 2: seed 000's consistent program on {args.devices} devices")
    losses = consistent_program(images, labels, steps)
    print(f"  loss: {losses[0]:.3f} at step 1 -> {losses[-1]:.3f} at step {steps}")

    print("== Part 3: one model, switched by one config line")
    (x, y), (x_test, y_test) = flow.data.load_digits()
    if args.smoke:
        x, y = x[:256], y[:256]
    epochs = 1 if args.smoke else 3
    places = [("mirrored", 1), ("mirrored", args.devices), ("consistent", args.devices)]
    results = {place: train_in(*place, x, y, x_test, y_test, epochs) for place in places}
    reference, _ = results[("mirrored", 1)]
    print(f"  {'view':<11} {'devices':>7}  {'test accuracy':>13}  max |w - w(1 device)| after epoch 1")
    for (view, n), (weights, accuracy) in results.items():
        diff = max(float(np.abs(a - b).max()) for a, b in zip(weights, reference))
        print(f"  {view:<11} {n:>7}  {accuracy:>13.4f}  {diff:.2e}")
    worst = max(float(np.abs(a - b).max()) for w, _ in results.values() for a, b in zip(w, reference))
    # Not bit for bit: N devices add up a gradient in another order than one
    # device does, so the last bits differ (~1e-8).  The weights are compared
    # after one epoch because over a long run such a difference can tip a ReLU
    # or a max-pool tie the other way and then grow, as any change of summation
    # order does (another GPU kernel, say) -- docs: concepts/promise.md.
    print(f"same weights in every place (to 1e-5): {worst < 1e-5}")
    print(f"done in {time.perf_counter() - start:.1f}s")
    return worst


if __name__ == "__main__":
    main()
