"""keras.io's GAN ("DCGAN to generate face images", its train_step as written, with small MLPs): a train_step with
two ``apply_gradients``, the discriminator's then the generator's through the updated discriminator, run as two
ordered stages.  On real MNIST rows, the latent vectors passed in the data instead of drawn (deterministic), it
trains equal to Keras 3 running the same train_step from the same weights, in both views on 2 devices."""
import keras
import numpy as np
import pytest

import flowlayers as flow

tf = pytest.importorskip("tensorflow")     # used beside the backend under test: without it the file is skipped

LATENT = 8
pytestmark = [pytest.mark.needs_tensorflow, pytest.mark.filterwarnings("ignore:load_mnist_arrays")]


def _gan_class(k, tape_class, o, training):
    class GAN(k.Model):
        def __init__(self, discriminator, generator):
            super().__init__()
            self.discriminator, self.generator = discriminator, generator
            self.d_loss_tracker = k.metrics.Mean(name="d_loss")
            self.g_loss_tracker = k.metrics.Mean(name="g_loss")
            self.steps_traced = 0

        def compile(self, d_optimizer, g_optimizer, loss_fn):
            super().compile()
            self.d_optimizer, self.g_optimizer, self.loss_fn = d_optimizer, g_optimizer, loss_fn

        @property
        def metrics(self):
            return [self.d_loss_tracker, self.g_loss_tracker]

        def train_step(self, data):
            self.steps_traced += 1
            real_images = data["real"]
            generated_images = self.generator(data["z"])
            combined_images = o.concatenate([generated_images, real_images], axis=0)
            column = o.mean(real_images, axis=1, keepdims=True)       # (batch, 1), as the predictions
            labels = o.concatenate([o.ones_like(column), o.zeros_like(column)], axis=0)
            with tape_class() as tape:
                predictions = self.discriminator(combined_images, training=training)
                d_loss = self.loss_fn(labels, predictions)
            grads = tape.gradient(d_loss, self.discriminator.trainable_weights)
            self.d_optimizer.apply_gradients(zip(grads, self.discriminator.trainable_weights))

            misleading_labels = o.zeros_like(column)
            with tape_class() as tape:
                predictions = self.discriminator(self.generator(data["z_more"]), training=training)
                g_loss = self.loss_fn(misleading_labels, predictions)
            grads = tape.gradient(g_loss, self.generator.trainable_weights)
            self.g_optimizer.apply_gradients(zip(grads, self.generator.trainable_weights))

            self.d_loss_tracker.update_state(d_loss)
            self.g_loss_tracker.update_state(g_loss)
            return {"d_loss": self.d_loss_tracker.result(), "g_loss": self.g_loss_tracker.result()}
    return GAN


def _gan(k, tape_class, batch_norm=False, training=None, optimizer="Adam"):
    o = flow.ops if k is flow else keras.ops
    z = k.Input((LATENT,))
    generator = k.Model(z, k.layers.Dense(784, activation="sigmoid", name="g_out")(
        k.layers.Dense(32, activation="relu", name="g_hidden")(z)), name="generator")
    image = k.Input((784,))
    hidden = k.layers.Dense(32, activation="relu", name="d_hidden")(image)
    if batch_norm:
        hidden = k.layers.BatchNormalization(name="d_norm")(hidden)
    discriminator = k.Model(image, k.layers.Dense(1, name="d_out")(hidden), name="discriminator")
    gan = _gan_class(k, tape_class, o, training)(discriminator, generator)
    rate = 1e-3 if optimizer == "Adam" else 0.05
    gan.compile(d_optimizer=getattr(k.optimizers, optimizer)(rate), g_optimizer=getattr(k.optimizers, optimizer)(rate),
                loss_fn=k.losses.BinaryCrossentropy(from_logits=True))
    return gan


@pytest.fixture(scope="module")
def data(shared_data):
    (x, _), _ = flow.data.load_mnist_arrays(shared_data)
    rng = np.random.default_rng(11)
    return {"real": x[:48].reshape(-1, 784).astype("float32") / 255,
            "z": rng.normal(size=(48, LATENT)).astype("float32"),
            "z_more": rng.normal(size=(48, LATENT)).astype("float32")}


@pytest.mark.slow
@pytest.mark.parametrize("view", ["consistent", "mirrored"])
def test_the_keras_io_gan_trains_in_two_ordered_stages_as_keras(data, view):
    flow.config.set_view(view)
    flow.config.gpu_device_num(2)
    gan, reference = _gan(flow, flow.GradientTape), _gan(keras, tf.GradientTape)
    reference.generator.set_weights(gan.generator.get_weights())
    reference.discriminator.set_weights(gan.discriminator.get_weights())
    ours = gan.fit(data, batch_size=12, epochs=2, shuffle=False, verbose=0).history
    theirs = reference.fit(data, batch_size=12, epochs=2, shuffle=False, verbose=0).history
    assert gan.steps_traced == 1
    assert gan.d_optimizer.iterations == gan.g_optimizer.iterations == 8
    for key in ("d_loss", "g_loss"):
        np.testing.assert_allclose(ours[key], theirs[key], rtol=1e-5, atol=1e-6)
    for ours_model, their_model in ((gan.generator, reference.generator), (gan.discriminator, reference.discriminator)):
        for a, b in zip(ours_model.get_weights(), their_model.get_weights()):
            np.testing.assert_allclose(a, b, atol=1e-5)


@pytest.mark.slow
@pytest.mark.parametrize("training", [None, True])
def test_batch_norm_in_the_discriminator_runs_as_keras(data, training):
    """BatchNormalization in the discriminator, called in both stages: without ``training`` (keras.io's form) in
    inference mode, as Keras runs a call in a custom step; with ``training=True`` on batch statistics, its moving
    statistics moving once per call (consistent view: the mirrored view's batch statistics are per replica)."""
    flow.config.set_view("consistent")
    flow.config.gpu_device_num(2)
    # SGD: Adam's first steps magnify the rounding of near-0 gradients (BatchNormalization's beta) past 1e-5
    gan = _gan(flow, flow.GradientTape, True, training, "SGD")
    reference = _gan(keras, tf.GradientTape, True, training, "SGD")
    reference.generator.set_weights(gan.generator.get_weights())
    reference.discriminator.set_weights(gan.discriminator.get_weights())
    ours = gan.fit(data, batch_size=12, epochs=1, shuffle=False, verbose=0).history
    theirs = reference.fit(data, batch_size=12, epochs=1, shuffle=False, verbose=0).history
    np.testing.assert_allclose(ours["g_loss"], theirs["g_loss"], rtol=1e-5)
    for a, b in zip(gan.discriminator.get_weights(), reference.discriminator.get_weights()):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-5)


def test_a_loss_computed_before_an_apply_that_changes_what_it_read_is_refused():
    """Both losses taken before the first apply: the generator's loss read the discriminator before its update,
    which a later stage cannot see again (Keras would use the old discriminator): refused by name."""
    class Early(flow.Model):
        def __init__(self, d, g):
            super().__init__()
            self.d, self.g = d, g

        def train_step(self, data):
            with flow.GradientTape(persistent=True) as tape:
                d_loss = flow.ops.mean(self.d(data))
                g_loss = flow.ops.mean(self.d(self.g(data)))
            d_vars, g_vars = self.d.trainable_weights, self.g.trainable_weights
            self.optimizer.apply(tape.gradient(d_loss, d_vars), d_vars)
            self.optimizer.apply(tape.gradient(g_loss, g_vars), g_vars)
            return {}

    x = flow.Input((4,))
    d = flow.Model(x, flow.layers.Dense(4, name="d")(x))
    y = flow.Input((4,))
    g = flow.Model(y, flow.layers.Dense(4, name="g")(y))
    model = Early(d, g)
    model.compile(optimizer=flow.optimizers.SGD(0.1))
    with pytest.raises(flow.GraphError, match=r"the loss Blob .* applied by optimizer.apply #2 reads variable "
                                              r"'d/kernel' as it was before optimizer.apply #1 updated it"):
        model.fit(np.ones((4, 4), np.float32), verbose=0)
