"""Keras-style layers (``Dense``) and OneFlow's functional layers (``dense``) in one namespace."""
from .base import Layer
from .convolution import Conv2D
from .core import Activation, Add, Concatenate, Dropout, Embedding, ReLU, Softmax
from .dense import Dense
from .functional import batch_normalization, conv2d, dense
from .normalization import BatchNormalization, LayerNormalization
from .pooling import AveragePooling2D, AvgPool2D, MaxPool2D, MaxPooling2D
from .reshaping import Flatten, Reshape

Convolution2D = Conv2D

__all__ = [
    "Layer", "Dense", "Conv2D", "Convolution2D", "MaxPool2D", "MaxPooling2D", "AveragePooling2D", "AvgPool2D",
    "Flatten", "Reshape", "Dropout", "BatchNormalization", "LayerNormalization", "Embedding", "Activation", "ReLU",
    "Softmax", "Add", "Concatenate", "dense", "conv2d", "batch_normalization",
]
