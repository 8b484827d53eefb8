"""Maximum, Minimum, Average and Dot (and the functional forms) against Keras 3's: the same outputs and, through a
Dense after them, the same SGD step, on one device, two mirrored replicas and a 2x2 mesh."""
import pytest

import flowlayers as flow
from keras_reference import compare

SEQ = (7, 3)

CASES = {
    "Maximum": (lambda L: L.Maximum(), [SEQ, SEQ, SEQ]),
    "Minimum": (lambda L: L.Minimum(), [SEQ, SEQ]),
    "Average": (lambda L: L.Average(), [SEQ, SEQ, SEQ]),
    "Dot-sequences": (lambda L: L.Dot(axes=(2, 2)), [(5, 3), (4, 3)]),
    "Dot-sequences-axis1": (lambda L: L.Dot(axes=1), [(5, 3), (5, 4)]),
    "Dot-vectors-normalized": (lambda L: L.Dot(axes=1, normalize=True), [(4,), (4,)]),
    "Dot-vector-and-matrix": (lambda L: L.Dot(axes=(1, 1)), [(4,), (4, 3)]),
    "Dot-negative-axes": (lambda L: L.Dot(axes=-1, normalize=True), [(5, 3), (2, 3)]),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_merge_is_keras(name):
    make, shapes = CASES[name]
    compare(lambda api: make(api.layers), shapes)
    compare(lambda api: make(api.layers), shapes, head=lambda api: api.layers.Dense(2, name="head"),
            rules={"head/kernel$": (None, "model")})


@pytest.mark.parametrize("fn, cls", [("maximum", "Maximum"), ("minimum", "Minimum"), ("dot", "Dot")])
def test_functional_forms(fn, cls):
    a, b = flow.Input((4,)), flow.Input((4,))
    y = getattr(flow.layers, fn)([a, b])
    assert type(y.call[0].owner).__name__ == cls


@pytest.mark.parametrize("make, message", [
    (lambda a, b: flow.layers.Dot(axes="last"), r"axes expected an int or a pair of ints, received 'last'"),
    (lambda a, b: flow.layers.Dot(axes=1)([a, b]), r"expected inputs of rank >= 2 with equal sizes on axes \[1, 1\]"),
    (lambda a, b: flow.layers.Maximum()([a]), r"expected a list of at least 2 Blobs"),
])
def test_mistakes_are_named(make, message):
    with pytest.raises(flow.FlowLayersError, match=message):
        make(flow.Input((4,)), flow.Input((3,))).shape
