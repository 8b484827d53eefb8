"""keras.io, "Convolutional autoencoder for image denoising", on real MNIST digits: an encoder of ``Conv2D`` and
``MaxPooling2D(padding="same")``, a decoder of strided ``Conv2DTranspose`` and a sigmoid ``Conv2D``, trained with
``binary_crossentropy`` to map noisy digits to clean ones, validated on held-out noisy digits."""
import numpy as np

import flowlayers as keras
from flowlayers import layers


def preprocess(array):
    array = array.astype("float32") / 255.0
    return np.reshape(array, (len(array), 28, 28, 1))


def noise(array, seed):
    noise_factor = 0.4
    rng = np.random.default_rng(seed)
    noisy_array = array + noise_factor * rng.normal(loc=0.0, scale=1.0, size=array.shape)
    return np.clip(noisy_array, 0.0, 1.0).astype("float32")


def get_data(mnist):
    (train_data, _), _ = mnist
    train_data, test_data = preprocess(train_data[:128]), preprocess(train_data[128:192])
    return {"x": noise(train_data, 0), "y": train_data, "x_test": noise(test_data, 1), "y_test": test_data}


def make_model():
    input = layers.Input(shape=(28, 28, 1))

    # Encoder
    x = layers.Conv2D(8, (3, 3), activation="relu", padding="same")(input)
    x = layers.MaxPooling2D((2, 2), padding="same")(x)
    x = layers.Conv2D(8, (3, 3), activation="relu", padding="same")(x)
    x = layers.MaxPooling2D((2, 2), padding="same")(x)

    # Decoder
    x = layers.Conv2DTranspose(8, (3, 3), strides=2, activation="relu", padding="same")(x)
    x = layers.Conv2DTranspose(8, (3, 3), strides=2, activation="relu", padding="same")(x)
    x = layers.Conv2D(1, (3, 3), activation="sigmoid", padding="same")(x)

    autoencoder = keras.Model(input, x)
    autoencoder.compile(optimizer="adam", loss="binary_crossentropy")
    return autoencoder


def train(model, data):
    return model.fit(x=data["x"], y=data["y"], epochs=2, batch_size=32, shuffle=False, verbose=0,
                     validation_data=(data["x_test"], data["y_test"]))
