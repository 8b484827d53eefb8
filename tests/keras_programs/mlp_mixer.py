"""keras.io, "Image classification with modern MLP models": the MLP-Mixer's ``MLPMixerLayer`` as keras.io writes
it (token mixing through ``ops.transpose``, feed-forward ``keras.Sequential``s without an ``Input``, gelu,
``LayerNormalization``), on MNIST digits cut into 7x7 patches.  keras.io cuts patches with
``keras.ops.image.extract_patches`` (refused by name here: ``test_keras_programs.py``'s refusals); here
``ops.reshape`` and ``ops.transpose`` cut the same patches, and an ``EinsumDense`` embeds them."""
import numpy as np

import flowlayers as keras
from flowlayers import layers, ops

patch_size = 7
num_patches = (28 // patch_size) ** 2
embedding_dim = 16
# keras.io drops 0.2; off here, so that each step is the same math as Keras' (the masks are drawn differently)
dropout_rate = 0.0


class Patches(layers.Layer):
    def __init__(self, patch_size, **kwargs):
        super().__init__(**kwargs)
        self.patch_size = patch_size

    def call(self, images):
        size = self.patch_size
        rows, cols, channels = ops.shape(images)[1:]
        x = ops.reshape(images, (-1, rows // size, size, cols // size, size, channels))
        x = ops.transpose(x, axes=(0, 1, 3, 2, 4, 5))
        return ops.reshape(x, (-1, (rows // size) * (cols // size), size * size * channels))


class MLPMixerLayer(layers.Layer):
    def __init__(self, num_patches, hidden_units, dropout_rate, *args, **kwargs):
        super().__init__(*args, **kwargs)

        self.mlp1 = keras.Sequential(
            [
                layers.Dense(units=num_patches, activation="gelu"),
                layers.Dense(units=num_patches),
                layers.Dropout(rate=dropout_rate),
            ]
        )
        self.mlp2 = keras.Sequential(
            [
                layers.Dense(units=num_patches, activation="gelu"),
                layers.Dense(units=hidden_units),
                layers.Dropout(rate=dropout_rate),
            ]
        )
        self.normalize = layers.LayerNormalization(epsilon=1e-6)

    def call(self, inputs):
        x = self.normalize(inputs)
        x_channels = ops.transpose(x, axes=(0, 2, 1))
        mlp1_outputs = self.mlp1(x_channels)
        mlp1_outputs = ops.transpose(mlp1_outputs, axes=(0, 2, 1))
        x = mlp1_outputs + inputs
        x_patches = self.normalize(x)
        mlp2_outputs = self.mlp2(x_patches)
        x = x + mlp2_outputs
        return x


def get_data(mnist):
    (x_train, y_train), _ = mnist
    x = x_train[:192, :, :, None].astype("float32") / 255
    return {"x": x, "y": y_train[:192], "x_test": x_train[192:256, :, :, None].astype("float32") / 255}


def make_model(num_blocks=2):
    inputs = layers.Input(shape=(28, 28, 1))
    patches = Patches(patch_size)(inputs)
    x = layers.EinsumDense("bpd,de->bpe", output_shape=(num_patches, embedding_dim), bias_axes="e")(patches)
    for _ in range(num_blocks):
        x = MLPMixerLayer(num_patches, embedding_dim, dropout_rate)(x)
    representation = layers.GlobalAveragePooling1D()(x)
    representation = layers.Dropout(rate=dropout_rate)(representation)
    logits = layers.Dense(10)(representation)
    model = keras.Model(inputs=inputs, outputs=logits)
    model.compile(
        optimizer=keras.optimizers.AdamW(learning_rate=3e-3, weight_decay=1e-4),
        loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
        metrics=[keras.metrics.SparseCategoricalAccuracy(name="acc")],
    )
    return model


def train(model, data):
    return model.fit(data["x"], data["y"], batch_size=64, epochs=2, shuffle=False, verbose=0)
