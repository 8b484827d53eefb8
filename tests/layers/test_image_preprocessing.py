"""Resizing (bilinear and nearest, up and down, with crop_to_aspect_ratio) and CenterCrop (cropping, and resizing
an image smaller than the target) against Keras 3's: the same outputs and, through a Dense after them, the same
SGD step, on one device, two mirrored replicas and a 2x2 mesh."""
import numpy as np
import pytest

import flowlayers as flow
from keras_reference import compare

IMAGE = (6, 7, 3)

CASES = {
    "Resizing-down": (lambda L: L.Resizing(4, 5), IMAGE),
    "Resizing-up": (lambda L: L.Resizing(9, 11), IMAGE),
    "Resizing-mixed-channels_first": (lambda L: L.Resizing(4, 9, data_format="channels_first"), (3, 6, 7)),
    "Resizing-nearest-up": (lambda L: L.Resizing(9, 10, interpolation="nearest"), IMAGE),
    "Resizing-nearest-down": (lambda L: L.Resizing(4, 3, interpolation="nearest"), IMAGE),
    "Resizing-crop-to-aspect-ratio": (lambda L: L.Resizing(4, 4, crop_to_aspect_ratio=True), IMAGE),
    "Resizing-crop-wide": (lambda L: L.Resizing(2, 6, crop_to_aspect_ratio=True), IMAGE),
    "CenterCrop": (lambda L: L.CenterCrop(4, 5), IMAGE),
    "CenterCrop-odd": (lambda L: L.CenterCrop(3, 2), IMAGE),
    "CenterCrop-larger": (lambda L: L.CenterCrop(8, 4), IMAGE),
    "CenterCrop-channels_first": (lambda L: L.CenterCrop(5, 5, data_format="channels_first"), (3, 6, 7)),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_image_layer_is_keras(name):
    make, shape = CASES[name]
    compare(lambda api: make(api.layers), shape, x=np.random.default_rng(0).uniform(0, 255, (8,) + shape).astype(
        np.float32), atol=2e-5)
    compare(lambda api: make(api.layers), shape, head=lambda api: api.layers.Dense(2, name="head"),
            rules={"head/kernel$": (None, "model")})


@pytest.mark.parametrize("make, message", [
    (lambda: flow.layers.Resizing(4, 4, interpolation="bicubic"), r"interpolation expected 'bilinear' or 'nearest'"),
    (lambda: flow.layers.Resizing(4, 4, pad_to_aspect_ratio=True), r"pad_to_aspect_ratio=True is not supported"),
    (lambda: flow.layers.Resizing(4, 4, antialias=True), r"antialias=True is not supported"),
    (lambda: flow.layers.CenterCrop(0, 4), r"height expected a positive int, received 0"),
    (lambda: flow.layers.CenterCrop(2, 2)(flow.Input((None, 5, 3))), r"expected images of known size"),
])
def test_mistakes_are_named(make, message):
    with pytest.raises(flow.FlowLayersError, match=message):
        make()
