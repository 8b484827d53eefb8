"""GroupNormalization and UnitNormalization against Keras 3's: the same outputs and SGD step, on one device, two
mirrored replicas and a 2x2 mesh (GroupNormalization's gamma and beta split over ``model`` there)."""
import pytest

import flowlayers as flow
from keras_reference import compare

SPLIT = {"(gamma|beta)$": ("model",)}       # per channel, over the 2x2 mesh's model axis
CASES = {   # name: (layer, input shape, layout rules on the 2x2 mesh)
    "GroupNormalization-sequence": (lambda L: L.GroupNormalization(groups=2, beta_initializer="random_normal",
                                                                   gamma_initializer="random_normal"), (5, 4), SPLIT),
    "GroupNormalization-image-per-channel": (lambda L: L.GroupNormalization(groups=-1, epsilon=1e-2), (6, 7, 3), {}),
    "GroupNormalization-channels-first": (lambda L: L.GroupNormalization(groups=3, axis=1, center=False), (6, 4, 5),
                                          SPLIT),
    "UnitNormalization": (lambda L: L.UnitNormalization(), (7, 3), {}),
    "UnitNormalization-two-axes": (lambda L: L.UnitNormalization(axis=[1, 2]), (7, 3), {}),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_normalization_is_keras(name):
    make, shape, rules = CASES[name]
    compare(lambda api: make(api.layers), shape, rules=rules)


@pytest.mark.parametrize("make, message", [
    (lambda: flow.layers.GroupNormalization(groups=3)(flow.Input((5, 4))),
     r"expected a known channel count on axis -1 that divides into 3 groups, received shape \(None, 5, 4\)"),
    (lambda: flow.layers.GroupNormalization(groups=0), r"groups expected a positive int or -1, received 0"),
    (lambda: flow.layers.UnitNormalization(axis="last"), r"axis expected an int or a list of ints, received 'last'"),
])
def test_mistakes_are_named(make, message):
    with pytest.raises(flow.FlowLayersError, match=message):
        make()
