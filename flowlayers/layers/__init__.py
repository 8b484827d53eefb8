"""Keras-style layers (``Dense``) and OneFlow's functional layers (``dense``) in one namespace; a Keras layer
flowlayers lacks is refused by name, saying what to use instead."""
from .. import missing
from ..errors import LayerError
from ..inputs import Input, InputLayer
from .attention import MultiHeadAttention
from .base import Layer
from .bidirectional import Bidirectional
from .convolution import Conv1D, Conv2D, Conv2DTranspose
from .core import (Activation, Add, Average, Concatenate, Dropout, Embedding, Multiply, ReLU, Rescaling,
                   ReversibleEmbedding, Softmax, Subtract, add, average, concatenate, multiply, subtract)
from .dense import Dense
from .einsum_dense import EinsumDense
from .functional import batch_normalization, conv2d, dense
from .normalization import BatchNormalization, LayerNormalization
from .pooling import (AveragePooling2D, AvgPool2D, GlobalAveragePooling2D, GlobalAvgPool2D, GlobalMaxPool2D,
                      GlobalMaxPooling2D, MaxPool2D, MaxPooling2D)
from .recurrent import GRU, LSTM, SimpleRNN
from .reshaping import Flatten, Reshape, UpSampling2D, ZeroPadding2D
from .time_distributed import TimeDistributed

Convolution1D, Convolution2D, Convolution2DTranspose = Conv1D, Conv2D, Conv2DTranspose

__all__ = [
    "Layer", "Dense", "Conv2D", "Convolution2D", "MaxPool2D", "MaxPooling2D", "AveragePooling2D", "AvgPool2D",
    "Flatten", "Reshape", "Dropout", "BatchNormalization", "LayerNormalization", "Embedding", "Activation", "ReLU",
    "Softmax", "Add", "Concatenate", "dense", "conv2d", "batch_normalization", "Conv1D", "Convolution1D",
    "GlobalAveragePooling2D", "GlobalAvgPool2D", "GlobalMaxPooling2D", "GlobalMaxPool2D", "UpSampling2D",
    "ZeroPadding2D", "Rescaling", "Subtract", "Multiply", "Average", "add", "subtract", "multiply", "average",
    "concatenate", "Conv2DTranspose", "Convolution2DTranspose", "MultiHeadAttention",
    "EinsumDense", "ReversibleEmbedding", "SimpleRNN", "LSTM", "GRU", "Bidirectional", "TimeDistributed",
    "Input", "InputLayer",
]


def __getattr__(name):
    """A Keras ``layers`` name flowlayers lacks: a LayerError naming it and what to use instead."""
    return missing.refuse("layers", name, LayerError, globals())
