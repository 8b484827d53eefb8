"""SpatialDropout1D/2D, GaussianNoise and GaussianDropout: the identity in inference (as Keras'), and while
training the statistics of Keras' definitions (a draw cannot equal Keras'), new draws each step and on each device,
the same draws again for a seed.  ActivityRegularization against Keras 3: the same loss and the same SGD step."""
import keras
import numpy as np
import pytest

import flowlayers as flow
from keras_reference import compare, use
from random_draws import differ_by_step_and_device_and_repeat

RANDOM = {
    "SpatialDropout1D": (lambda L: L.SpatialDropout1D(0.4, seed=5), (7, 3)),
    "SpatialDropout2D": (lambda L: L.SpatialDropout2D(0.4), (4, 5, 3)),
    "SpatialDropout2D-channels_first": (lambda L: L.SpatialDropout2D(0.4, data_format="channels_first"), (3, 4, 5)),
    "GaussianNoise": (lambda L: L.GaussianNoise(0.5), (7, 3)),
    "GaussianDropout": (lambda L: L.GaussianDropout(0.3), (7, 3)),
}


@pytest.mark.parametrize("name", sorted(RANDOM))
def test_inference_is_the_identity_as_in_keras(name):
    make, shape = RANDOM[name]
    compare(lambda api: make(api.layers), shape, places=("one", "2x2"))


def _ones(shape, rows=64):
    return np.ones((rows,) + shape, np.float32)


@pytest.mark.parametrize("view", ["mirrored", "consistent"])
@pytest.mark.parametrize("name", sorted(RANDOM))
def test_training_draws_anew_each_step_and_device_and_repeats_for_a_seed(name, view):
    make, shape = RANDOM[name]
    differ_by_step_and_device_and_repeat(lambda: make(flow.layers), _ones(shape, 4), view)


@pytest.mark.parametrize("name, channels_axis", [("SpatialDropout1D", -1), ("SpatialDropout2D", -1),
                                                 ("SpatialDropout2D-channels_first", 1)])
def test_spatial_dropout_drops_whole_channels_at_its_rate(name, channels_axis):
    make, shape = RANDOM[name]
    out = differ_by_step_and_device_and_repeat(lambda: make(flow.layers), _ones(shape), "mirrored")
    out = np.moveaxis(out, 2 + channels_axis if channels_axis > 0 else -1, -1)     # (..., channels)
    per_channel = out.reshape(out.shape[:3] + (-1, out.shape[-1]))
    assert np.all(per_channel == per_channel[:, :, :, :1]), "a channel was dropped in part"
    assert set(np.unique(out)) == {0.0, np.float32(1 / 0.6)}
    assert abs((out == 0).mean() - 0.4) < 0.05, (out == 0).mean()


@pytest.mark.parametrize("name, mean, std", [("GaussianNoise", 1.0, 0.5),
                                             ("GaussianDropout", 1.0, np.sqrt(0.3 / 0.7))])
def test_gaussian_noise_has_keras_mean_and_deviation(name, mean, std):
    make, shape = RANDOM[name]
    out = differ_by_step_and_device_and_repeat(lambda: make(flow.layers), _ones(shape, 256), "mirrored",
                                               same=np.allclose)
    assert abs(out.mean() - mean) < 0.02 and abs(out.std() - std) < 0.02, (out.mean(), out.std())
    z = (out - mean) / std
    assert abs(np.mean(z ** 3)) < 0.1 and abs(np.mean(z ** 4) - 3) < 0.2     # normal: no skew, kurtosis 3


@pytest.mark.parametrize("l1, l2", [(0.01, 0.0), (0.0, 0.02), (0.01, 0.03)])
def test_activity_regularization_adds_keras_penalty(l1, l2):
    """Dense -> ActivityRegularization -> Dense: the same loss (penalty included) and the same SGD step as Keras,
    in every place."""
    def build(api):
        x = api.Input((5,))
        hidden = api.layers.Dense(4, name="hidden")(x)
        return api.Model(x, api.layers.Dense(2, name="out")(api.layers.ActivityRegularization(l1, l2)(hidden)))

    rng = np.random.default_rng(0)
    x, y = rng.normal(size=(8, 5)).astype(np.float32), rng.normal(size=(8, 2)).astype(np.float32)
    theirs = build(keras)
    use("one")
    initial = build(flow).get_weights()
    theirs.set_weights(initial)
    theirs.compile(keras.optimizers.SGD(0.1), "mse")
    their_loss = theirs.train_on_batch(x, y)
    for place, rules in (("one", {}), ("mirrored2", {}), ("2x2", {"hidden/kernel$": (None, "model")})):
        use(place, rules)
        ours = build(flow)
        ours.set_weights(initial)
        ours.compile(flow.optimizers.SGD(0.1), "mse")
        loss = ours.train_on_batch(x, y)
        np.testing.assert_allclose(np.ravel(loss)[0], np.ravel(their_loss)[0], rtol=1e-5, err_msg=place)
        for a, b in zip(ours.get_weights(), theirs.get_weights()):
            np.testing.assert_allclose(a, b, atol=1e-5, err_msg=place)


@pytest.mark.parametrize("make, message", [
    (lambda: flow.layers.SpatialDropout1D(1.0), r"rate expected a number in \[0, 1\), received 1.0"),
    (lambda: flow.layers.GaussianNoise(-1), r"stddev expected a number >= 0, received -1"),
    (lambda: flow.layers.ActivityRegularization(l1="a"), r"l1 expected a number >= 0, received 'a'"),
    (lambda: flow.layers.SpatialDropout2D(0.5)(flow.Input((4, 3))), r"expected an input of rank 4"),
])
def test_mistakes_are_named(make, message):
    with pytest.raises(flow.FlowLayersError, match=message):
        make()
