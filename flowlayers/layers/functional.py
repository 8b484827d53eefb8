"""OneFlow's functional layers: ``flow.layers.dense(x, 512, name="dense1")``.

Each builds the Keras layer of the same name and calls it once, so weights
live at ``<name>/kernel`` and job functions share them by name.
"""
from .. import distribute, regularizers
from ..errors import LayerError, SBPError
from .convolution import Conv2D
from .dense import Dense
from .normalization import BatchNormalization


def dense(inputs, units, activation=None, use_bias=True, kernel_initializer=None, bias_initializer=None,
          kernel_regularizer=None, bias_regularizer=None, trainable=True, name=None, model_distribute=None):
    """OneFlow's ``flow.layers.dense``.  ``model_distribute=flow.distribute.split(0)`` splits the units over the
    devices (OneFlow's weight is ``(units, in)``; here the kernel is ``(in, units)``, split along its dim 1, and
    the bias with it); ``split(1)`` splits the inputs (the kernel's dim 0; the bias stays whole)."""
    where = f"flow.layers.dense(name={name!r})" if name else "flow.layers.dense"
    if model_distribute is not None:
        distribute.check(model_distribute, f"{where}: model_distribute")
        if model_distribute.axis not in (None, 0, 1):
            raise SBPError(f"{where}: model_distribute expected split(0), split(1) or "
                           f"broadcast() of its (units, in) weight, received {model_distribute!r}")
    layer = Dense(units, activation=activation, use_bias=use_bias,
                  kernel_initializer=kernel_initializer or "glorot_uniform",
                  bias_initializer=bias_initializer or "zeros", trainable=trainable, name=name,
                  **_oneflow_regularizers(kernel_regularizer, bias_regularizer, where))
    out = layer(inputs)
    if model_distribute is not None and model_distribute.axis is not None:
        layer.kernel.distribute = distribute.split(1 - model_distribute.axis)
        if use_bias and model_distribute.axis == 0:
            layer.bias.distribute = distribute.split(0)
    return out


def conv2d(inputs, filters, kernel_size=1, strides=1, padding="VALID", data_format="NCHW", dilation_rate=1,
           groups=1, activation=None, use_bias=True, kernel_initializer=None, bias_initializer=None,
           kernel_regularizer=None, bias_regularizer=None, trainable=True, name=None, weight_name=None,
           bias_name=None):
    """OneFlow's ``flow.layers.conv2d``; ``groups`` other than 1 and ``weight_name``/``bias_name`` are refused."""
    where = f"flow.layers.conv2d(name={name!r})" if name else "flow.layers.conv2d"
    if groups != 1:
        raise LayerError(f"{where}: groups={groups!r} is not supported (grouped convolution); expected 1")
    for what, value in (("weight_name", weight_name), ("bias_name", bias_name)):
        if value is not None:
            raise LayerError(f"{where}: {what}={value!r} is not supported; expected None (the weights are "
                             f"<name>/kernel and <name>/bias)")
    layer = Conv2D(filters, kernel_size, strides=strides, padding=padding, data_format=data_format,
                   dilation_rate=dilation_rate, activation=activation, use_bias=use_bias,
                   kernel_initializer=kernel_initializer or "glorot_uniform",
                   bias_initializer=bias_initializer or "zeros", trainable=trainable, name=name,
                   **_oneflow_regularizers(kernel_regularizer, bias_regularizer, where))
    return layer(inputs)


def _oneflow_regularizers(kernel, bias, where):
    """OneFlow's meaning for ``flow.regularizers.l1/l2/l1_l2`` given to a functional layer."""
    return {f"{what}_regularizer": regularizers.get(value, f"{where}: {what}_regularizer", convention="oneflow")
            for what, value in (("kernel", kernel), ("bias", bias))}


def batch_normalization(inputs, axis=1, momentum=0.99, epsilon=0.001, center=True, scale=True, trainable=True,
                        training=True, name=None):
    """OneFlow's batch normalisation; ``axis=1`` suits NCHW. ``training`` True uses batch statistics."""
    layer = BatchNormalization(axis=axis, momentum=momentum, epsilon=epsilon, center=center, scale=scale,
                               trainable=trainable, name=name)
    return layer(inputs, training=training)
