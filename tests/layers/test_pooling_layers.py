"""MaxPooling1D/3D, AveragePooling1D/2D/3D and the global poolings (1-D, 2-D, 3-D) against Keras 3's: the same
outputs for each padding and data format, on one device, two mirrored replicas and a 2x2 mesh."""
import pytest

from keras_reference import compare

SEQ, IMAGE, VOLUME = (7, 3), (6, 7, 3), (4, 5, 6, 2)

CASES = {
    "MaxPooling1D": (lambda L: L.MaxPooling1D(), SEQ),
    "MaxPooling1D-same-channels_first": (lambda L: L.MaxPooling1D(3, 2, padding="same",
                                                                  data_format="channels_first"), SEQ),
    "AveragePooling1D-same": (lambda L: L.AveragePooling1D(3, 2, padding="same"), SEQ),
    "AveragePooling1D-valid": (lambda L: L.AveragePooling1D(2, 1), SEQ),
    "AveragePooling2D": (lambda L: L.AveragePooling2D((2, 3), strides=(1, 2), padding="same"), IMAGE),
    "MaxPooling3D": (lambda L: L.MaxPooling3D(padding="same"), VOLUME),
    "MaxPooling3D-channels_first": (lambda L: L.MaxPooling3D((2, 3, 1), strides=1, data_format="channels_first"),
                                    VOLUME),
    "AveragePooling3D-same": (lambda L: L.AveragePooling3D((2, 3, 2), strides=(1, 2, 2), padding="same"), VOLUME),
    "AveragePooling3D-channels_first": (lambda L: L.AveragePooling3D(2, data_format="channels_first"), VOLUME),
    "GlobalAveragePooling1D": (lambda L: L.GlobalAveragePooling1D(), SEQ),
    "GlobalMaxPooling1D-channels_first-keepdims": (lambda L: L.GlobalMaxPooling1D("channels_first", keepdims=True),
                                                   SEQ),
    "GlobalMaxPooling2D": (lambda L: L.GlobalMaxPooling2D(), IMAGE),
    "GlobalAveragePooling3D": (lambda L: L.GlobalAveragePooling3D(), VOLUME),
    "GlobalMaxPooling3D-keepdims": (lambda L: L.GlobalMaxPooling3D(keepdims=True), VOLUME),
    "GlobalAveragePooling3D-channels_first": (lambda L: L.GlobalAveragePooling3D("channels_first"), VOLUME),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_pooling_is_keras(name):
    make, shape = CASES[name]
    compare(lambda api: make(api.layers), shape)
