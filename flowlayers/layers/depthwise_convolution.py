"""DepthwiseConv2D (each channel convolved with its own ``depth_multiplier`` filters), SeparableConv2D (that, then a
1x1 convolution mixing the channels) and SeparableConv1D (the 2-D one over rows of height 1), as Keras 3 holds
their weights: ``depthwise_kernel`` (kh, kw, in, multiplier), ``pointwise_kernel`` (1, 1, in * multiplier,
filters), ``bias``."""
from .. import activations, initializers, regularizers
from ..errors import LayerError
from ..ops import depthwise
from ..ops.conv import bias_add, conv2d, ntuple, standardize_data_format, standardize_padding
from ..ops.shape import reshape
from .base import Layer
from .convolution import keras_format


class _Depthwise(Layer):
    """What the three share: the depthwise kernel, an optional bias, an activation; ``rank`` 1 or 2."""
    rank = 2

    def __init__(self, kernel_size, strides, padding, depth_multiplier, data_format, dilation_rate, activation,
                 use_bias, depthwise_initializer, bias_initializer, depthwise_regularizer, bias_regularizer,
                 **kwargs):
        super().__init__(**kwargs)
        self.what = what = f"layer {self.name!r} ({type(self).__name__})"
        n = self.rank
        self.kernel_size = ntuple(kernel_size, n, what, "kernel_size")
        self.strides = ntuple(strides, n, what, "strides")
        self.dilation_rate = ntuple(dilation_rate, n, what, "dilation_rate")
        (self.depth_multiplier,) = ntuple(depth_multiplier, 1, what, "depth_multiplier")
        self.padding = standardize_padding(padding, what)
        self.data_format = standardize_data_format(data_format or "channels_last", what)
        self.activation = activations.get(activation, f"{what}: activation")
        if not isinstance(use_bias, bool):
            raise LayerError(f"{what}: use_bias expected True or False, received {use_bias!r}")
        self.use_bias = use_bias
        self.depthwise_initializer = initializers.get(depthwise_initializer)
        self.bias_initializer = initializers.get(bias_initializer)
        self.depthwise_regularizer = regularizers.get(depthwise_regularizer, f"{what}: depthwise_regularizer")
        self.bias_regularizer = regularizers.get(bias_regularizer, f"{what}: bias_regularizer")

    @property
    def input_ndim(self):
        return self.rank + 2

    def _channel_axis(self):
        return 1 if self.data_format == "NCHW" else self.rank + 1

    def build(self, input_shape):
        axis = self._channel_axis()
        channels = input_shape[axis]
        if channels is None:
            raise LayerError(f"{self.what}: expected a known channel count on axis {axis}, received shape "
                             f"{input_shape}")
        self.depthwise_kernel = self.add_weight("depthwise_kernel", self.kernel_size + (channels,
                                                                                        self.depth_multiplier),
                                                self.depthwise_initializer, regularizer=self.depthwise_regularizer)
        self.build_pointwise(channels * self.depth_multiplier)
        self.bias = self.add_weight("bias", (self.out_channels(channels),), self.bias_initializer,
                                    regularizer=self.bias_regularizer) if self.use_bias else None
        self.fix_feature_dims(**{f"axis_{axis}": channels})

    def build_pointwise(self, channels):
        pass

    def out_channels(self, channels):
        return channels * self.depth_multiplier

    def call(self, x):
        first = self.data_format == "NCHW"
        if self.rank == 1:      # (N, W, C) as (N, 1, W, C), the kernels with a leading 1
            n, c, w = (x.shape[0], x.shape[1], x.shape[2]) if first else (x.shape[0], x.shape[2], x.shape[1])
            x = reshape(x, (n, c, 1, w) if first else (n, 1, w, c))
        y = self.mix(depthwise.depthwise_conv2d(x, self._as_2d(self.depthwise_kernel), self._pair(self.strides),
                                                self.padding, self.data_format, self._pair(self.dilation_rate)))
        if self.rank == 1:
            y = reshape(y, (n, y.shape[1], y.shape[3]) if first else (n, y.shape[2], y.shape[3]))
        if self.use_bias:
            y = bias_add(y, self.read(self.bias), axis=self._channel_axis())
        return self.activation(y)

    def mix(self, y):
        return y

    def _as_2d(self, var):
        kernel = self.read(var)
        return kernel if self.rank == 2 else reshape(kernel, (1,) + var.shape)

    def _pair(self, value):
        return value if self.rank == 2 else (1,) + value

    def get_config(self):
        return {**super().get_config(), "kernel_size": self.kernel_size, "strides": self.strides,
                "padding": self.padding.lower(), "depth_multiplier": self.depth_multiplier,
                "data_format": keras_format(self.data_format), "dilation_rate": self.dilation_rate,
                "activation": activations.name_of(self.activation), "use_bias": self.use_bias,
                "depthwise_initializer": initializers.serialize(self.depthwise_initializer),
                "bias_initializer": initializers.serialize(self.bias_initializer),
                "depthwise_regularizer": regularizers.serialize(self.depthwise_regularizer),
                "bias_regularizer": regularizers.serialize(self.bias_regularizer)}


class DepthwiseConv2D(_Depthwise):
    def __init__(self, kernel_size, strides=(1, 1), padding="valid", depth_multiplier=1, data_format=None,
                 dilation_rate=(1, 1), activation=None, use_bias=True, depthwise_initializer="glorot_uniform",
                 bias_initializer="zeros", depthwise_regularizer=None, bias_regularizer=None, **kwargs):
        super().__init__(kernel_size, strides, padding, depth_multiplier, data_format, dilation_rate, activation,
                         use_bias, depthwise_initializer, bias_initializer, depthwise_regularizer, bias_regularizer,
                         **kwargs)


class _Separable(_Depthwise):
    def __init__(self, filters, kernel_size, strides, padding, data_format, dilation_rate, depth_multiplier,
                 activation, use_bias, depthwise_initializer, pointwise_initializer, bias_initializer,
                 depthwise_regularizer, pointwise_regularizer, bias_regularizer, **kwargs):
        super().__init__(kernel_size, strides, padding, depth_multiplier, data_format, dilation_rate, activation,
                         use_bias, depthwise_initializer, bias_initializer, depthwise_regularizer, bias_regularizer,
                         **kwargs)
        if isinstance(filters, bool) or not isinstance(filters, int) or filters <= 0:
            raise LayerError(f"{self.what}: filters expected a positive int, received {filters!r}")
        self.filters = filters
        self.pointwise_initializer = initializers.get(pointwise_initializer)
        self.pointwise_regularizer = regularizers.get(pointwise_regularizer, f"{self.what}: pointwise_regularizer")

    def build_pointwise(self, channels):
        self.pointwise_kernel = self.add_weight("pointwise_kernel", (1,) * self.rank + (channels, self.filters),
                                                self.pointwise_initializer, regularizer=self.pointwise_regularizer)

    def out_channels(self, channels):
        return self.filters

    def mix(self, y):
        return conv2d(y, self._as_2d(self.pointwise_kernel), 1, "VALID", self.data_format)

    def get_config(self):
        return {**super().get_config(), "filters": self.filters,
                "pointwise_initializer": initializers.serialize(self.pointwise_initializer),
                "pointwise_regularizer": regularizers.serialize(self.pointwise_regularizer)}


class SeparableConv2D(_Separable):
    def __init__(self, filters, kernel_size, strides=(1, 1), padding="valid", data_format=None, dilation_rate=(1, 1),
                 depth_multiplier=1, activation=None, use_bias=True, depthwise_initializer="glorot_uniform",
                 pointwise_initializer="glorot_uniform", bias_initializer="zeros", depthwise_regularizer=None,
                 pointwise_regularizer=None, bias_regularizer=None, **kwargs):
        super().__init__(filters, kernel_size, strides, padding, data_format, dilation_rate, depth_multiplier,
                         activation, use_bias, depthwise_initializer, pointwise_initializer, bias_initializer,
                         depthwise_regularizer, pointwise_regularizer, bias_regularizer, **kwargs)


class SeparableConv1D(_Separable):
    rank = 1

    def __init__(self, filters, kernel_size, strides=1, padding="valid", data_format=None, dilation_rate=1,
                 depth_multiplier=1, activation=None, use_bias=True, depthwise_initializer="glorot_uniform",
                 pointwise_initializer="glorot_uniform", bias_initializer="zeros", depthwise_regularizer=None,
                 pointwise_regularizer=None, bias_regularizer=None, **kwargs):
        super().__init__(filters, kernel_size, strides, padding, data_format, dilation_rate, depth_multiplier,
                         activation, use_bias, depthwise_initializer, pointwise_initializer, bias_initializer,
                         depthwise_regularizer, pointwise_regularizer, bias_regularizer, **kwargs)


SeparableConvolution1D, SeparableConvolution2D = SeparableConv1D, SeparableConv2D