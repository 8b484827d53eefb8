"""Keras-style layers (``Dense``) and OneFlow's functional layers (``dense``) in one namespace; a Keras layer
flowlayers lacks is refused by name, saying what to use instead."""
from .. import missing
from ..errors import LayerError
from ..inputs import Input, InputLayer
from .attention import MultiHeadAttention
from .augmentation import RandomContrast, RandomFlip, RandomRotation, RandomTranslation, RandomZoom
from .base import Layer
from .bidirectional import Bidirectional
from .convolution import Conv1D, Conv1DTranspose, Conv2D, Conv2DTranspose, Conv3D
from .core import (Activation, Add, Average, Concatenate, Dropout, Embedding, Multiply, ReLU, Rescaling,
                   ReversibleEmbedding, Softmax, Subtract, add, average, concatenate, multiply, subtract)
from .dense import Dense
from .depthwise_convolution import (DepthwiseConv2D, SeparableConv1D, SeparableConv2D, SeparableConvolution1D,
                                    SeparableConvolution2D)
from .dot_attention import AdditiveAttention, Attention
from .einsum_dense import EinsumDense
from .functional import batch_normalization, conv2d, dense
from .image_preprocessing import CenterCrop, Resizing
from .lambda_layer import Identity, Lambda
from .masking import Masking
from .merging import Dot, Maximum, Minimum, dot, maximum, minimum
from .normalization import BatchNormalization, GroupNormalization, LayerNormalization, UnitNormalization
from .pooling import (AveragePooling1D, AveragePooling2D, AveragePooling3D, AvgPool1D, AvgPool2D, AvgPool3D,
                      GlobalAveragePooling1D, GlobalAveragePooling2D, GlobalAveragePooling3D, GlobalAvgPool1D,
                      GlobalAvgPool2D, GlobalAvgPool3D, GlobalMaxPool1D, GlobalMaxPool2D, GlobalMaxPool3D,
                      GlobalMaxPooling1D, GlobalMaxPooling2D, GlobalMaxPooling3D, MaxPool1D, MaxPool2D, MaxPool3D,
                      MaxPooling1D, MaxPooling2D, MaxPooling3D)
from .preprocessing import CategoryEncoding, Discretization, Normalization
from .recurrent import GRU, LSTM, SimpleRNN
from .regularization import ActivityRegularization, GaussianDropout, GaussianNoise, SpatialDropout1D, SpatialDropout2D
from .reshaping import (Cropping1D, Cropping2D, Flatten, Permute, RepeatVector, Reshape, UpSampling1D, UpSampling2D,
                        ZeroPadding1D, ZeroPadding2D)
from .time_distributed import TimeDistributed

Convolution1D, Convolution2D, Convolution3D = Conv1D, Conv2D, Conv3D
Convolution1DTranspose, Convolution2DTranspose = Conv1DTranspose, Conv2DTranspose

__all__ = [
    "Layer", "Dense", "Conv2D", "Convolution2D", "MaxPool2D", "MaxPooling2D", "AveragePooling2D", "AvgPool2D",
    "Flatten", "Reshape", "Dropout", "BatchNormalization", "LayerNormalization", "Embedding", "Activation", "ReLU",
    "Softmax", "Add", "Concatenate", "dense", "conv2d", "batch_normalization", "Conv1D", "Convolution1D",
    "GlobalAveragePooling2D", "GlobalAvgPool2D", "GlobalMaxPooling2D", "GlobalMaxPool2D", "UpSampling2D",
    "ZeroPadding2D", "Rescaling", "Subtract", "Multiply", "Average", "add", "subtract", "multiply", "average",
    "concatenate", "Conv2DTranspose", "Convolution2DTranspose", "MultiHeadAttention",
    "EinsumDense", "ReversibleEmbedding",
    # pooling
    "MaxPooling1D", "MaxPool1D", "MaxPooling3D", "MaxPool3D", "AveragePooling1D", "AvgPool1D", "AveragePooling3D",
    "AvgPool3D", "GlobalAveragePooling1D", "GlobalAvgPool1D", "GlobalAveragePooling3D", "GlobalAvgPool3D",
    "GlobalMaxPooling1D", "GlobalMaxPool1D", "GlobalMaxPooling3D", "GlobalMaxPool3D",
    # convolutions
    "Conv3D", "Convolution3D", "Conv1DTranspose", "Convolution1DTranspose", "DepthwiseConv2D", "SeparableConv1D",
    "SeparableConvolution1D", "SeparableConv2D", "SeparableConvolution2D",
    # normalization and regularization
    "GroupNormalization", "UnitNormalization", "SpatialDropout1D", "SpatialDropout2D", "GaussianNoise",
    "GaussianDropout", "ActivityRegularization",
    # reshaping and merging
    "Permute", "RepeatVector", "Cropping1D", "Cropping2D", "ZeroPadding1D", "UpSampling1D", "Maximum", "Minimum",
    "Dot", "maximum", "minimum", "dot",
    # core, attention
    "Lambda", "Identity", "Masking", "Attention", "AdditiveAttention",
    # preprocessing
    "Normalization", "Discretization", "CategoryEncoding", "Resizing", "CenterCrop", "RandomFlip", "RandomRotation",
    "RandomZoom", "RandomContrast", "RandomTranslation",
    # recurrent, inputs
    "SimpleRNN", "LSTM", "GRU", "Bidirectional", "TimeDistributed",
    "Input", "InputLayer",
]


def __getattr__(name):
    """A Keras ``layers`` name flowlayers lacks: a LayerError naming it and what to use instead."""
    return missing.refuse("layers", name, LayerError, globals())
