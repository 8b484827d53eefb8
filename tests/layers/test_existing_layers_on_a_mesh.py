"""Layers flowlayers had before the Keras catalogue, against Keras 3 on the 2x2 ``data x model`` mesh too (their
own tests compare them on one or two devices): EinsumDense with its kernel split over ``model``, Rescaling,
AveragePooling2D and GlobalMaxPooling2D."""
import pytest

import flowlayers as flow
from keras_reference import compare

CASES = {   # name: (layer, input shape, layout rules on the 2x2 mesh)
    "EinsumDense-heads": (lambda L: L.EinsumDense("abc,cde->abde", (None, 2, 4), bias_axes="de", activation="relu",
                                                  bias_initializer="random_normal"), (4, 6),
                          {"^einsum_dense/kernel$": (None, None, "model"), "^einsum_dense/bias$": (None, "model")}),
    "EinsumDense-ellipsis": (lambda L: L.EinsumDense("...b,bc->...c", 4, bias_axes="c"), (3, 6),
                             {"^einsum_dense/kernel$": ("model", None)}),
    "Rescaling": (lambda L: L.Rescaling(1 / 255, offset=-0.5), (4, 6), {}),
    "AveragePooling2D": (lambda L: L.AveragePooling2D((2, 3), padding="same", data_format="channels_first"),
                         (3, 6, 7), {}),
    "GlobalMaxPooling2D": (lambda L: L.GlobalMaxPooling2D(keepdims=True), (6, 7, 3), {}),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_layer_is_keras_on_a_mesh(name):
    make, shape, rules = CASES[name]
    compare(lambda api: make(api.layers), shape, rules=rules, head=lambda api: api.layers.Dense(2, name="head"))
