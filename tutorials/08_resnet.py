"""A small ResNet on real handwritten digits, data parallel in either view.

    python tutorials/08_resnet.py                        # consistent view, 2 devices
    python tutorials/08_resnet.py --view mirrored --devices 4
    python tutorials/08_resnet.py --smoke

Residual networks are the other family people spread over devices.  This one has the parts that matter: basic
blocks of two 3x3 convolutions with BatchNormalization, a projection shortcut where the width and resolution
change, and global average pooling before the classifier.  It is written once with Keras' layers; the view is a
config line.  In the consistent view BatchNormalization sees the whole logical batch, so the weights are those of
one device; in the mirrored view each replica normalises by its own rows (as OneFlow's mirrored view does), the
one place where a view switch changes results, by a little.
"""
import argparse

import numpy as np

import flowlayers as flow

# BatchNormalization's moving statistics (what evaluation uses) follow the batches at 0.9 rather than Keras' 0.99:
# with 45 steps an epoch, 0.99 would still be mostly the initial statistics after a short run
MOMENTUM = 0.9

def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--view", choices=["consistent", "mirrored"], default="consistent")
    parser.add_argument("--devices", type=int, default=2)
    parser.add_argument("--epochs", type=int, default=8)
    parser.add_argument("--smoke", action="store_true", help="two epochs (what CI runs)")
    return parser.parse_args(argv)


def block(x, filters, stride, name):
    L = flow.layers
    h = L.Conv2D(filters, 3, strides=stride, padding="same", use_bias=False, name=f"{name}_conv1")(x)
    h = L.Activation("relu")(L.BatchNormalization(momentum=MOMENTUM, name=f"{name}_bn1")(h))
    h = L.Conv2D(filters, 3, padding="same", use_bias=False, name=f"{name}_conv2")(h)
    h = L.BatchNormalization(momentum=MOMENTUM, name=f"{name}_bn2")(h)
    if stride != 1 or x.shape[-1] != filters:        # the shortcut changes width and resolution with the block
        x = L.Conv2D(filters, 1, strides=stride, use_bias=False, name=f"{name}_proj")(x)
        x = L.BatchNormalization(momentum=MOMENTUM, name=f"{name}_proj_bn")(x)
    return L.Activation("relu")(L.add([x, h]))


def resnet(classes=10):
    L = flow.layers
    inputs = flow.Input((8, 8, 1))
    h = L.Conv2D(16, 3, padding="same", use_bias=False, name="stem")(inputs)
    h = L.Activation("relu")(L.BatchNormalization(momentum=MOMENTUM, name="stem_bn")(h))
    h = block(block(h, 16, 1, "b1"), 32, 2, "b2")
    h = block(h, 32, 1, "b3")
    return flow.Model(inputs, L.Dense(classes, name="head")(L.GlobalAveragePooling2D()(h)), name="resnet")


def main(argv=None):
    args = parse_args(argv)
    flow.config.set_view(args.view)
    flow.config.gpu_device_num(args.devices)
    flow.config.set_seed(0)
    (x_train, y_train), (x_test, y_test) = flow.data.load_digits(image_format="NHWC")
    model = resnet()
    model.compile(flow.optimizers.SGD(0.05, momentum=0.9),
                  flow.losses.SparseCategoricalCrossentropy(from_logits=True), metrics=["accuracy"])
    print(f"view: {args.view}, devices: {args.devices}, {model.count_params():,} parameters, "
          f"{len(x_train)} training digits")
    history = model.fit(x_train, y_train, batch_size=32, epochs=2 if args.smoke else args.epochs, shuffle=True,
                        verbose=0)
    loss, accuracy = model.evaluate(x_test, y_test, verbose=0)
    print(f"training loss: {history.history['loss'][0]:.3f} (first epoch) -> {history.history['loss'][-1]:.3f}")
    print(f"test loss: {loss:.3f}")
    print(f"test accuracy: {accuracy:.3f}")
    predictions = np.argmax(model.predict(x_test[:10], verbose=0), axis=1)
    print(f"first ten test digits: {y_test[:10].tolist()}, predicted {predictions.tolist()}")


if __name__ == "__main__":
    main()
