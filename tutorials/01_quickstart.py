"""Quickstart: one Keras-style model, written once, trained on several devices.

    python tutorials/01_quickstart.py                    # 2 devices, the view in force
    python tutorials/01_quickstart.py --view mirrored    # pick the view on the command line
    python tutorials/01_quickstart.py --devices 4 --smoke

The data set is scikit-learn's bundled handwritten digits (1,797 real 8x8
images shipped inside the installed scikit-learn), so nothing is downloaded.
A full run trains for a few seconds on two CPU cores and reaches > 0.9 test
accuracy; ``--smoke`` trains on a few batches only, to check the wiring.
"""
import argparse
import os
import sys
import time

import numpy as np

import flowlayers as flow

OUT_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "out")


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--view", choices=["consistent", "mirrored"], default=None,
                        help="the view to run in; default: the one in force (flow.config.view(): "
                             "$FLOWLAYERS_VIEW, else consistent)")
    parser.add_argument("--devices", type=int, default=2,
                        help="devices to use (logical CPU devices stand in where there is no GPU); default 2")
    parser.add_argument("--smoke", action="store_true", help="train a few batches only (a wiring check)")
    parser.add_argument("--out", default=OUT_DIR, help=f"where the plot goes; default {OUT_DIR}")
    return parser.parse_args(argv)


def build_model():
    # A model is a graph of *logical* Blobs: shapes are those of the whole
    # batch on one big imaginary device, whatever the device count.  The
    # images arrive channels first, (batch, 1, 8, 8), as OneFlow's NCHW.
    x = flow.Input((1, 8, 8), name="digits")
    h = flow.layers.Conv2D(32, 3, padding="same", activation="relu", data_format="channels_first")(x)
    h = flow.layers.MaxPool2D(2, data_format="channels_first")(h)
    # Blobs can be printed while building: nothing has run yet.
    print(f"after the first conv block: {h.shape}")
    h = flow.layers.Conv2D(64, 3, padding="same", activation="relu", data_format="channels_first")(h)
    h = flow.layers.MaxPool2D(2, data_format="channels_first")(h)
    h = flow.layers.Flatten()(h)
    h = flow.layers.Dense(64, activation="relu")(h)
    logits = flow.layers.Dense(10)(h)
    return flow.Model(inputs=x, outputs=logits, name="digits_cnn")


def save_curve(history, path):
    # The plot is a bonus: matplotlib is not a dependency of flowlayers.
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("training curve: skipped (matplotlib is not installed; `pip install matplotlib` to get it)")
        return
    epochs = np.arange(1, len(history.history["loss"]) + 1)
    fig, (ax_loss, ax_acc) = plt.subplots(1, 2, figsize=(9, 3.5))
    for key, style in (("loss", "-"), ("val_loss", "--")):
        if key in history.history:
            ax_loss.plot(epochs, history.history[key], style, label=key)
    for key, style in (("accuracy", "-"), ("val_accuracy", "--")):
        if key in history.history:
            ax_acc.plot(epochs, history.history[key], style, label=key)
    ax_loss.set(xlabel="epoch", title="loss")
    ax_acc.set(xlabel="epoch", title="accuracy")
    for ax in (ax_loss, ax_acc):
        ax.legend()
    fig.tight_layout()
    os.makedirs(os.path.dirname(path), exist_ok=True)
    fig.savefig(path, dpi=100)
    plt.close(fig)
    print(f"training curve: {path}")


def main(argv=None):
    args = parse_args(argv)
    start = time.perf_counter()

    # 1. Where the model runs: one line each.  The device count is how many
    #    replicas (mirrored) or mesh devices (consistent) there are; on a host
    #    without GPUs, that many logical CPU devices stand in for them.  The
    #    view is only set when asked for: otherwise the one in force is used
    #    ($FLOWLAYERS_VIEW, else the consistent view), so this same script
    #    runs unchanged in either.
    flow.config.gpu_device_num(args.devices)
    if args.view is not None:
        flow.config.set_view(args.view)
    print(f"view: {flow.config.view()}, devices: {args.devices}")

    # 2. The data: real handwritten digits, split 1,438 train / 359 test.
    (x_train, y_train), (x_test, y_test) = flow.data.load_digits()
    print(f"train: {x_train.shape}, test: {x_test.shape}")

    # 3. The model, in Keras' words.  Nothing in it mentions devices or views.
    model = build_model()
    model.compile(optimizer=flow.optimizers.Adam(0.003),
                  loss=flow.losses.SparseCategoricalCrossentropy(from_logits=True),
                  metrics=["accuracy"])
    model.summary()

    # 4. Train, keeping the last 10% of the training set aside for validation.
    #    The batch is the *logical* batch: in either view each device gets its
    #    share of the 64 samples and the gradients are combined, so the weights
    #    are those one device would have computed.
    if args.smoke:
        history = model.fit(x_train, y_train, batch_size=64, epochs=1, steps_per_epoch=4,
                            validation_split=0.1, verbose=2)
    else:
        history = model.fit(x_train, y_train, batch_size=64, epochs=12, validation_split=0.1, verbose=2)

    # 5. Evaluate on the test digits, which training never saw.
    loss, accuracy = model.evaluate(x_test, y_test, batch_size=128, verbose=0)
    print(f"test loss: {loss:.4f}, test accuracy: {accuracy:.4f}")

    # The weights read back are full logical arrays, whatever the view.
    kernel = model.get_weights()[0]
    print(f"first kernel, read back whole: {kernel.shape}")

    save_curve(history, os.path.join(args.out, "01_training_curve.png"))
    print(f"done in {time.perf_counter() - start:.1f}s")
    if not args.smoke and accuracy <= 0.9:
        sys.exit(f"test accuracy {accuracy:.4f} is not above 0.9: something is wrong with this installation")
    return accuracy


if __name__ == "__main__":
    main()
