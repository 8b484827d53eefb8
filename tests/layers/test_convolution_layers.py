"""Conv3D, Conv1DTranspose, DepthwiseConv2D and SeparableConv1D/2D against Keras 3's: the same weight shapes and
order, the same outputs and the same SGD step, on one device, two mirrored replicas and a 2x2 mesh whose layout
rules split the kernels over ``model``."""
import pytest

from keras_reference import compare

SEQ, IMAGE, VOLUME = (7, 3), (6, 7, 3), (4, 5, 6, 2)
BIAS = {"bias_initializer": "random_normal"}

CASES = {   # name: (layer, input shape, layout rules on the 2x2 mesh)
    "Conv3D-same": (lambda L: L.Conv3D(4, 2, padding="same", **BIAS), VOLUME,
                    {"kernel$": (None, None, None, None, "model")}),
    "Conv3D-dilated-relu": (lambda L: L.Conv3D(2, (2, 2, 3), dilation_rate=(1, 2, 1), activation="relu", **BIAS),
                            VOLUME, {}),
    "Conv3D-strided-channels_first": (lambda L: L.Conv3D(2, 2, strides=2, data_format="channels_first", **BIAS),
                                      VOLUME, {"bias$": ("model",)}),
    "Conv1DTranspose-same": (lambda L: L.Conv1DTranspose(4, 3, strides=2, padding="same", **BIAS), SEQ,
                             {"kernel$": (None, "model", None)}),
    "Conv1DTranspose-valid-channels_first": (lambda L: L.Conv1DTranspose(2, 3, strides=2,
                                                                         data_format="channels_first"), SEQ, {}),
    "DepthwiseConv2D-same": (lambda L: L.DepthwiseConv2D(3, depth_multiplier=2, padding="same", **BIAS), IMAGE,
                             {"kernel$": (None, None, None, "model")}),
    "DepthwiseConv2D-strided": (lambda L: L.DepthwiseConv2D(2, strides=2, activation="tanh"), IMAGE, {}),
    "DepthwiseConv2D-dilated-channels_first": (lambda L: L.DepthwiseConv2D(2, dilation_rate=2, use_bias=False,
                                                                           data_format="channels_first"), IMAGE, {}),
    "SeparableConv2D": (lambda L: L.SeparableConv2D(4, 3, depth_multiplier=2, activation="relu", **BIAS), IMAGE,
                        {"pointwise_kernel$": (None, None, None, "model")}),
    "SeparableConv2D-same-strided": (lambda L: L.SeparableConv2D(2, 2, strides=2, padding="same"), IMAGE, {}),
    "SeparableConv1D": (lambda L: L.SeparableConv1D(4, 2, padding="same", strides=2, **BIAS), SEQ, {}),
    "SeparableConv1D-dilated-channels_first": (lambda L: L.SeparableConv1D(2, 2, dilation_rate=2,
                                                                           data_format="channels_first"), SEQ, {}),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_convolution_is_keras(name):
    make, shape, rules = CASES[name]
    compare(lambda api: make(api.layers), shape, rules=rules)
