"""OneFlow's functional layers: ``flow.layers.dense(x, 512, name="dense1")``.

Each builds the Keras layer of the same name and calls it once, so weights
live at ``<name>/kernel`` and job functions share them by name.
"""
from .convolution import Conv2D
from .dense import Dense
from .normalization import BatchNormalization


def dense(inputs, units, activation=None, use_bias=True, kernel_initializer=None, bias_initializer=None,
          trainable=True, name=None):
    layer = Dense(units, activation=activation, use_bias=use_bias,
                  kernel_initializer=kernel_initializer or "glorot_uniform",
                  bias_initializer=bias_initializer or "zeros", trainable=trainable, name=name)
    return layer(inputs)


def conv2d(inputs, filters, kernel_size=1, strides=1, padding="VALID", data_format="NCHW", dilation_rate=1,
           activation=None, use_bias=True, kernel_initializer=None, bias_initializer=None, trainable=True,
           name=None):
    layer = Conv2D(filters, kernel_size, strides=strides, padding=padding, data_format=data_format,
                   dilation_rate=dilation_rate, activation=activation, use_bias=use_bias,
                   kernel_initializer=kernel_initializer or "glorot_uniform",
                   bias_initializer=bias_initializer or "zeros", trainable=trainable, name=name)
    return layer(inputs)


def batch_normalization(inputs, axis=1, momentum=0.99, epsilon=0.001, center=True, scale=True, trainable=True,
                        training=True, name=None):
    """OneFlow's batch normalisation; ``axis=1`` suits NCHW. ``training`` True uses batch statistics."""
    layer = BatchNormalization(axis=axis, momentum=momentum, epsilon=epsilon, center=center, scale=scale,
                               trainable=trainable, name=name)
    return layer(inputs, training=training)
