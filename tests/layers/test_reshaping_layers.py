"""Permute, RepeatVector, Cropping1D/2D, ZeroPadding1D and UpSampling1D against Keras 3's: the same outputs (and,
through a Dense after them, the same gradients), on one device, two mirrored replicas and a 2x2 mesh."""
import pytest

import flowlayers as flow
from keras_reference import compare

SEQ, IMAGE = (7, 3), (6, 7, 3)

CASES = {
    "Permute": (lambda L: L.Permute((2, 1)), SEQ),
    "Permute-rank4": (lambda L: L.Permute((3, 1, 2)), IMAGE),
    "RepeatVector": (lambda L: L.RepeatVector(3), (4,)),
    "Cropping1D": (lambda L: L.Cropping1D((1, 2)), SEQ),
    "Cropping1D-int": (lambda L: L.Cropping1D(2), SEQ),
    "Cropping2D": (lambda L: L.Cropping2D(((1, 2), (0, 3))), IMAGE),
    "Cropping2D-channels_first": (lambda L: L.Cropping2D((1, 2), data_format="channels_first"), (3, 6, 7)),
    "ZeroPadding1D": (lambda L: L.ZeroPadding1D((1, 2)), SEQ),
    "ZeroPadding1D-channels_first": (lambda L: L.ZeroPadding1D(2, data_format="channels_first"), SEQ),
    "UpSampling1D": (lambda L: L.UpSampling1D(3), SEQ),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_reshaping_is_keras(name):
    make, shape = CASES[name]
    compare(lambda api: make(api.layers), shape)
    compare(lambda api: make(api.layers), shape, head=lambda api: api.layers.Dense(2, name="head"),
            rules={"head/kernel$": (None, "model")})


@pytest.mark.parametrize("make, message", [
    (lambda: flow.layers.Permute((1, 3)), r"dims expected a permutation of 1, 2, ..., n, received \(1, 3\)"),
    (lambda: flow.layers.Cropping1D((4, 3))(flow.Input((7, 3))), r"cropping \(4, 3\) leaves nothing of input shape"),
    (lambda: flow.layers.RepeatVector(0), r"n expected a positive int, received 0"),
    (lambda: flow.layers.ZeroPadding1D(-1), r"padding expected an int >= 0 or a pair of them, received -1"),
])
def test_mistakes_are_named(make, message):
    with pytest.raises(flow.FlowLayersError, match=message):
        make()
