"""Keras 3's ``Layer.add_loss``: a layer's call adds a scalar term, ``model.losses`` lists it, and the compiled loss
adds it.  A VAE in keras.io's style (encoder, sampling layer adding the KL term, decoder) on real MNIST rows trains
equal to Keras 3 from the same weights, the sampling noise fed as an input, in both views on 2 devices."""
import keras
import numpy as np
import pytest

import flowlayers as flow
from flowlayers import ops

LATENT = 2


pytestmark = pytest.mark.filterwarnings("ignore:load_mnist_arrays")


@pytest.fixture(scope="module")
def digits(shared_data):
    (x, _), _ = flow.data.load_mnist_arrays(shared_data)
    x = x[:48].reshape(-1, 784).astype("float32") / 255
    eps = np.random.default_rng(7).normal(size=(48, LATENT)).astype("float32")
    return x, eps


def _sampling_class(base, o):
    class Sampling(base):
        """z = z_mean + exp(z_log_var / 2) * eps; the KL divergence to N(0, 1) added as a loss (keras.io's VAE)."""

        def call(self, inputs):
            z_mean, z_log_var, eps = inputs
            kl = -0.5 * (1 + z_log_var - o.square(z_mean) - o.exp(z_log_var))
            self.add_loss(o.mean(o.sum(kl, axis=1)))
            return z_mean + o.exp(0.5 * z_log_var) * eps
    return Sampling


def _vae(k):
    """The VAE with ``k`` = flowlayers or keras (the same code, the library swapped)."""
    o = ops if k is flow else keras.ops
    x_in, eps_in = k.Input((784,), name="pixels"), k.Input((LATENT,), name="eps")
    h = k.layers.Dense(32, activation="relu", name="enc")(x_in)
    z_mean, z_log_var = k.layers.Dense(LATENT, name="z_mean")(h), k.layers.Dense(LATENT, name="z_log_var")(h)
    z = _sampling_class(k.layers.Layer, o)(name="sampling")([z_mean, z_log_var, eps_in])
    out = k.layers.Dense(784, activation="sigmoid", name="dec_out")(k.layers.Dense(32, activation="relu",
                                                                                  name="dec")(z))
    return k.Model([x_in, eps_in], out)


def _copy_weights(src, dst):
    for layer in src.layers:
        if layer.weights:
            dst.get_layer(layer.name).set_weights(layer.get_weights())


def test_add_loss_lists_the_term_and_refuses_a_non_scalar():
    model = _vae(flow)
    assert len(model.losses) == 1 and model.losses[0].shape == ()

    class Bad(flow.layers.Layer):
        def call(self, x):
            self.add_loss(x)
            return x

    with pytest.raises(flow.LayerError, match=r"add_loss: expected a scalar Blob .*shape \(None, 3\)"):
        Bad()(flow.Input((3,)))
    with pytest.raises(flow.LayerError, match="add_loss: expected a Blob computed in call, received float"):
        Bad().add_loss(0.5)


@pytest.mark.slow
@pytest.mark.parametrize("view", ["consistent", "mirrored"])
def test_vae_with_add_loss_trains_as_keras(digits, view):
    x, eps = digits
    flow.config.set_view(view)
    flow.config.gpu_device_num(2)
    model = _vae(flow)
    reference = _vae(keras)
    _copy_weights(model, reference)
    model.compile(optimizer=flow.optimizers.Adam(1e-2), loss="binary_crossentropy")
    reference.compile(optimizer=keras.optimizers.Adam(1e-2), loss="binary_crossentropy")
    ours = model.fit([x, eps], x, batch_size=16, epochs=2, shuffle=False, verbose=0).history["loss"]
    theirs = reference.fit([x, eps], x, batch_size=16, epochs=2, shuffle=False, verbose=0).history["loss"]
    np.testing.assert_allclose(ours, theirs, rtol=1e-5, atol=1e-5)
    for layer in [layer for layer in reference.layers if layer.weights]:
        for a, b in zip(model.get_layer(layer.name).get_weights(), layer.get_weights()):
            np.testing.assert_allclose(a, b, atol=1e-5)
    without = model.evaluate([x, eps], x, batch_size=16, verbose=0)
    np.testing.assert_allclose(without, reference.evaluate([x, eps], x, batch_size=16, verbose=0), rtol=1e-5)


def _vae_step_class(k, tape_class, o):
    class VAE(k.Model):
        """keras.io's VAE train_step: the reconstruction loss computed in the step, the KL term the sampling
        layer added (``self.losses``), trackers as attributes."""

        def __init__(self, encoder, decoder):
            super().__init__()
            self.encoder, self.decoder = encoder, decoder
            self.total_loss_tracker = k.metrics.Mean(name="total_loss")
            self.reconstruction_loss_tracker = k.metrics.Mean(name="reconstruction_loss")

        @property
        def metrics(self):
            return [self.total_loss_tracker, self.reconstruction_loss_tracker]

        def train_step(self, data):
            x, eps = data
            with tape_class() as tape:
                z_mean, z_log_var, z = self.encoder([x, eps])
                reconstruction = self.decoder(z)
                reconstruction_loss = o.mean(o.sum(o.square(x - reconstruction), axis=1))
                total_loss = reconstruction_loss + o.sum(self.losses)
            grads = tape.gradient(total_loss, self.trainable_weights)
            self.optimizer.apply_gradients(zip(grads, self.trainable_weights))
            self.total_loss_tracker.update_state(total_loss)
            self.reconstruction_loss_tracker.update_state(reconstruction_loss)
            return {m.name: m.result() for m in self.metrics}
    return VAE


def _vae_with_step(k, tape_class):
    o = ops if k is flow else keras.ops
    x_in, eps_in = k.Input((784,)), k.Input((LATENT,))
    h = k.layers.Dense(32, activation="relu", name="enc")(x_in)
    z_mean, z_log_var = k.layers.Dense(LATENT, name="z_mean")(h), k.layers.Dense(LATENT, name="z_log_var")(h)
    z = _sampling_class(k.layers.Layer, o)(name="sampling")([z_mean, z_log_var, eps_in])
    encoder = k.Model([x_in, eps_in], [z_mean, z_log_var, z], name="encoder")
    z_in = k.Input((LATENT,))
    decoder = k.Model(z_in, k.layers.Dense(784, activation="sigmoid", name="dec_out")(
        k.layers.Dense(32, activation="relu", name="dec")(z_in)), name="decoder")
    vae = _vae_step_class(k, tape_class, o)(encoder, decoder)
    vae.compile(optimizer=k.optimizers.SGD(0.005, momentum=0.9))     # Adam magnifies the noise of near-0 gradients
    return vae


@pytest.mark.slow
@pytest.mark.parametrize("view", ["consistent", "mirrored"])
def test_the_keras_io_vae_train_step_with_add_loss_trains_as_keras(digits, view):
    import tensorflow as tf

    x, eps = digits
    flow.config.set_view(view)
    flow.config.gpu_device_num(2)
    model, reference = _vae_with_step(flow, flow.GradientTape), _vae_with_step(keras, tf.GradientTape)
    reference.encoder.set_weights(model.encoder.get_weights())
    reference.decoder.set_weights(model.decoder.get_weights())
    ours = model.fit(x, eps, batch_size=16, epochs=2, shuffle=False, verbose=0).history
    theirs = reference.fit(x, eps, batch_size=16, epochs=2, shuffle=False, verbose=0).history
    for key in ("total_loss", "reconstruction_loss"):
        np.testing.assert_allclose(ours[key], theirs[key], rtol=1e-5, atol=1e-5)
    assert ours["total_loss"][0] > ours["reconstruction_loss"][0]        # the KL term counted
    for mine, theirs_model in ((model.encoder, reference.encoder), (model.decoder, reference.decoder)):
        for a, b in zip(mine.get_weights(), theirs_model.get_weights()):
            np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-5)
