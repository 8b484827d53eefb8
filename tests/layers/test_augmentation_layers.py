"""RandomFlip, RandomRotation, RandomZoom, RandomTranslation and RandomContrast.

A layer's draws cannot equal Keras' own, so: with a range of one value (a fixed transform) the output equals
Keras 3's (its layer called with ``training=True``) in every fill mode and interpolation, on one device and a 2x2
mesh; in inference it is the identity, as Keras'; while training, every step and device draws anew and a seed
draws the same again; and the parameters recovered from the outputs (an image that is a ramp, transformed, is a
ramp whose slope and offset are the transform's) are spread over the range the factor gives."""
import keras
import numpy as np
import pytest

import flowlayers as flow
from keras_reference import use
from random_draws import differ_by_step_and_device_and_repeat

RNG = np.random.default_rng(0)
IMAGES = RNG.uniform(0, 1, (8, 6, 7, 3)).astype(np.float32)

FIXED = {   # name: (class, arguments): each range holds one value, so the transform is fixed
    "rotation-90": ("RandomRotation", dict(factor=(0.25, 0.25))),
    "rotation-constant": ("RandomRotation", dict(factor=(0.1, 0.1), fill_mode="constant", fill_value=0.5)),
    "rotation-wrap": ("RandomRotation", dict(factor=(-0.3, -0.3), fill_mode="wrap")),
    "rotation-nearest": ("RandomRotation", dict(factor=(0.13, 0.13), fill_mode="nearest", interpolation="nearest")),
    "zoom-out": ("RandomZoom", dict(height_factor=(0.3, 0.3))),
    "zoom-in-out-constant": ("RandomZoom", dict(height_factor=(-0.4, -0.4), width_factor=(0.2, 0.2),
                                                fill_mode="constant")),
    "zoom-nearest": ("RandomZoom", dict(height_factor=(0.5, 0.5), width_factor=(0.5, 0.5), interpolation="nearest")),
    "translation": ("RandomTranslation", dict(height_factor=(0.2, 0.2), width_factor=(-0.3, -0.3))),
    "translation-wrap": ("RandomTranslation", dict(height_factor=(-0.5, -0.5), width_factor=(0.9, 0.9),
                                                   fill_mode="wrap")),
    "translation-channels_first": ("RandomTranslation", dict(height_factor=(-0.5, -0.5), width_factor=(0.9, 0.9),
                                                             data_format="channels_first")),
}


def _images(kwargs):
    return np.transpose(IMAGES, (0, 3, 1, 2)) if kwargs.get("data_format") == "channels_first" else IMAGES


def _predict(cls, kwargs, x, training):
    inputs = flow.Input(x.shape[1:])
    layer = getattr(flow.layers, cls)(**kwargs)
    return flow.Model(inputs, layer(inputs, training=training)).predict(x, verbose=0)


@pytest.mark.parametrize("name", sorted(FIXED))
def test_a_fixed_transform_is_keras(name):
    cls, kwargs = FIXED[name]
    x = _images(kwargs)
    want = np.asarray(getattr(keras.layers, cls)(**kwargs)(x, training=True))
    for place in ("one", "2x2"):
        use(place)
        np.testing.assert_allclose(_predict(cls, kwargs, x, True), want, atol=1e-5, err_msg=place)


RANDOM = {
    "RandomFlip": dict(mode="horizontal", seed=3),
    "RandomRotation": dict(factor=0.2),
    "RandomZoom": dict(height_factor=(-0.2, 0.3), width_factor=0.1, fill_mode="constant"),
    "RandomTranslation": dict(height_factor=0.2, width_factor=(0.0, 0.3), fill_mode="nearest"),
    "RandomContrast": dict(factor=(0.2, 0.5), value_range=(-10, 10)),
}


@pytest.mark.parametrize("cls", sorted(RANDOM))
def test_inference_is_the_identity_as_in_keras(cls):
    np.testing.assert_array_equal(np.asarray(getattr(keras.layers, cls)(**RANDOM[cls])(IMAGES, training=False)),
                                  IMAGES)
    for place in ("one", "2x2"):
        use(place)
        np.testing.assert_array_equal(_predict(cls, RANDOM[cls], IMAGES, None), IMAGES)


@pytest.mark.parametrize("view", ["mirrored", "consistent"])
@pytest.mark.parametrize("cls", sorted(RANDOM))
def test_training_draws_anew_each_step_and_device_and_repeats_for_a_seed(cls, view):
    differ_by_step_and_device_and_repeat(lambda: getattr(flow.layers, cls)(**RANDOM[cls]), IMAGES[:4], view,
                                         same=np.allclose)


SIZE = 16
CENTRE = slice(5, 11)       # pixels whose input point stays inside the image for the factors below
ROWS, COLS = np.meshgrid(np.arange(SIZE, dtype=np.float64), np.arange(SIZE, dtype=np.float64), indexing="ij")


def _ramps(rows=32):
    """Images whose channel 0 is the column index and channel 1 the row index."""
    ramp = np.stack([COLS, ROWS], axis=-1).astype(np.float32)
    return np.broadcast_to(ramp, (rows, SIZE, SIZE, 2)).copy()


def _affine(out):
    """Per image, (a0, a1, a2, b0, b1, b2) of the input point each output pixel read, fitted on the centre."""
    design = np.stack([COLS[CENTRE, CENTRE].ravel(), ROWS[CENTRE, CENTRE].ravel(), np.ones(36)], axis=1)
    fits = []
    for image in out.reshape((-1, SIZE, SIZE, 2)):
        xs, *_ = np.linalg.lstsq(design, image[CENTRE, CENTRE, 0].ravel(), rcond=None)
        ys, *_ = np.linalg.lstsq(design, image[CENTRE, CENTRE, 1].ravel(), rcond=None)
        fits.append(np.concatenate([xs, ys]))
    return np.array(fits)


def _spread(values, lower, upper):
    """Uniform on [lower, upper]: every value inside, and the sample's mean, min and max where U's fall."""
    width = upper - lower
    assert np.all(values >= lower - 1e-4) and np.all(values <= upper + 1e-4), (values.min(), values.max())
    assert abs(values.mean() - (lower + upper) / 2) < 0.1 * width, values.mean()
    assert values.min() < lower + 0.1 * width and values.max() > upper - 0.1 * width, (values.min(), values.max())


def _train_outputs(layer):
    return differ_by_step_and_device_and_repeat(layer, _ramps(), "mirrored", same=np.allclose)


def test_rotation_angles_spread_over_the_factor():
    fits = _affine(_train_outputs(lambda: flow.layers.RandomRotation(0.05)))
    _spread(np.degrees(np.arctan2(fits[:, 3], fits[:, 0])) / 360.0, -0.05, 0.05)
    np.testing.assert_allclose(fits[:, 1], -fits[:, 3], atol=1e-4)          # a rotation: -sin, sin


def test_zoom_draws_height_and_width_apart():
    fits = _affine(_train_outputs(lambda: flow.layers.RandomZoom((-0.2, 0.3), width_factor=0.1)))
    _spread(fits[:, 4] - 1.0, -0.2, 0.3)
    _spread(fits[:, 0] - 1.0, -0.1, 0.1)
    np.testing.assert_allclose(fits[:, 2], 7.5 * (1.0 - fits[:, 0]), atol=1e-3)      # about the centre


def test_zoom_without_a_width_factor_zooms_alike():
    fits = _affine(_train_outputs(lambda: flow.layers.RandomZoom(0.2)))
    _spread(fits[:, 4] - 1.0, -0.2, 0.2)
    np.testing.assert_allclose(fits[:, 0], fits[:, 4], atol=1e-5)


def test_translation_moves_by_the_factor_times_the_size():
    fits = _affine(_train_outputs(lambda: flow.layers.RandomTranslation((-0.1, 0.2), 0.15)))
    _spread(-fits[:, 5] / SIZE, -0.1, 0.2)
    _spread(-fits[:, 2] / SIZE, -0.15, 0.15)


def test_contrast_scales_the_deviation_from_the_mean():
    out = _train_outputs(lambda: flow.layers.RandomContrast((0.2, 0.5), value_range=(-100, 100)))
    out = out.reshape((-1, SIZE, SIZE, 2)).astype(np.float64)
    x = _ramps()[0].astype(np.float64)
    deviation = x - x.mean(axis=(0, 1))             # never 0: the ramps' means lie between pixels
    factors = (out - out.mean(axis=(1, 2), keepdims=True)) / deviation
    per_image = factors[:, 0, 0, 0]
    np.testing.assert_allclose(factors, np.broadcast_to(per_image[:, None, None, None], factors.shape), atol=1e-4)
    _spread(per_image, 0.8, 1.5)


def test_contrast_clips_to_the_value_range():
    out = _train_outputs(lambda: flow.layers.RandomContrast(0.9, value_range=(6.0, 9.0)))
    assert out.min() >= 6.0 and out.max() <= 9.0 and out.min() == 6.0 and out.max() == 9.0


@pytest.mark.parametrize("mode, axes", [("horizontal", (1,)), ("vertical", (0,)), ("horizontal_and_vertical", (0, 1))])
def test_flip_flips_half_the_images(mode, axes):
    out = _train_outputs(lambda: flow.layers.RandomFlip(mode)).reshape((-1, SIZE, SIZE, 2))
    flipped = np.array([np.array_equal(o, np.flip(_ramps()[0], axes)) for o in out])
    kept = np.array([np.array_equal(o, _ramps()[0]) for o in out])
    assert np.all(flipped | kept) and 0.3 < flipped.mean() < 0.7, flipped.mean()


@pytest.mark.parametrize("view, n", [("mirrored", 1), ("mirrored", 2), ("consistent", 2)])
def test_a_model_with_augmentation_trains(view, n):
    """Gradients pass through each layer to the convolution before it."""
    flow.config.set_view(view)
    flow.config.gpu_device_num(n)
    x = flow.Input((6, 7, 3))
    y = flow.layers.Conv2D(4, 1, name="conv")(x)
    for cls, kwargs in RANDOM.items():
        y = getattr(flow.layers, cls)(**kwargs)(y)
    model = flow.Model(x, flow.layers.Dense(2)(flow.layers.GlobalAveragePooling2D()(y)))
    model.compile(flow.optimizers.SGD(0.1), "mse")
    before = model.get_layer("conv").get_weights()[0]
    history = model.fit(IMAGES, np.ones((8, 2), np.float32), batch_size=4, epochs=2, verbose=0)
    assert np.all(np.isfinite(history.history["loss"]))
    assert not np.allclose(model.get_layer("conv").get_weights()[0], before)


@pytest.mark.parametrize("make, message", [
    (lambda: flow.layers.RandomFlip("diagonal"), r"mode expected one of \['horizontal', 'vertical', "
                                                 r"'horizontal_and_vertical'\], received 'diagonal'"),
    (lambda: flow.layers.RandomRotation(2.0), r"factor expected a number or a pair of numbers in \[-1.0, 1.0\]"),
    (lambda: flow.layers.RandomZoom(0.1, fill_mode="mirror"), r"fill_mode expected one of"),
    (lambda: flow.layers.RandomTranslation(0.1, None), r"width_factor expected a number or a pair of numbers"),
    (lambda: flow.layers.RandomContrast(0.5, value_range=(1, 0)), r"value_range expected \(low, high\) with low < "
                                                                   r"high"),
    (lambda: flow.layers.RandomRotation(0.1)(flow.Input((None, 4, 3))), r"expected a batch of images of known "
                                                                        r"size"),
])
def test_mistakes_are_named(make, message):
    with pytest.raises(flow.FlowLayersError, match=message):
        make()
