"""Conv2D: 2-D convolution with a (kh, kw, in, out) kernel, channels first or last."""
from .. import activations, initializers
from ..errors import LayerError
from ..ops import conv
from .base import Layer


class Conv2D(Layer):
    input_ndim = 4

    def __init__(self, filters, kernel_size, strides=1, padding="valid", data_format="channels_last",
                 dilation_rate=1, activation=None, use_bias=True, kernel_initializer="glorot_uniform",
                 bias_initializer="zeros", **kwargs):
        super().__init__(**kwargs)
        what = f"layer {self.name!r} (Conv2D)"
        if isinstance(filters, bool) or not isinstance(filters, int) or filters <= 0:
            raise LayerError(f"{what}: filters expected a positive int, received {filters!r}")
        self.filters = filters
        self.kernel_size = conv.pair(kernel_size, what, "kernel_size")
        self.strides = conv.pair(strides, what, "strides")
        self.dilation_rate = conv.pair(dilation_rate, what, "dilation_rate")
        self.padding = conv.standardize_padding(padding, what)
        self.data_format = conv.standardize_data_format(data_format, what)
        self.activation = activations.get(activation, f"{what}: activation")
        self.use_bias = use_bias
        self.kernel_initializer = initializers.get(kernel_initializer)
        self.bias_initializer = initializers.get(bias_initializer)

    def build(self, input_shape):
        axis = conv.channel_axis(self.data_format)
        if input_shape[axis] is None:
            raise LayerError(f"layer {self.name!r} (Conv2D): expected a known channel count on axis {axis} "
                             f"({self.data_format}), received shape {input_shape}")
        self.kernel = self.add_weight("kernel", self.kernel_size + (input_shape[axis], self.filters),
                                      self.kernel_initializer)
        self.bias = self.add_weight("bias", (self.filters,), self.bias_initializer) if self.use_bias else None
        self.fix_feature_dims(**{f"axis_{axis}": input_shape[axis]})

    def call(self, x):
        y = conv.conv2d(x, self.read(self.kernel), self.strides, self.padding, self.data_format, self.dilation_rate)
        if self.use_bias:
            y = conv.bias_add(y, self.read(self.bias), axis=conv.channel_axis(self.data_format))
        return self.activation(y)

    def get_config(self):
        return {**super().get_config(), "filters": self.filters, "kernel_size": self.kernel_size,
                "strides": self.strides, "padding": self.padding.lower(), "data_format": self.data_format,
                "activation": activations.name_of(self.activation), "use_bias": self.use_bias}
