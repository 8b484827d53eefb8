"""Conv2D: 2-D convolution with a (kh, kw, in, out) kernel, channels first or last; Conv1D with a
(k, in, out) kernel, run as a Conv2D over rows of height 1; Conv3D with a (kd, kh, kw, in, out) kernel;
Conv2DTranspose and Conv1DTranspose (a Conv2DTranspose over rows of height 1)."""
from .. import activations
from ..errors import LayerError
from ..ops import conv3d
from ..ops.conv import bias_add, channel_axis, conv2d, conv2d_transpose, ntuple, pair, standardize_data_format, standardize_padding
from ..ops.shape import pad, reshape
from .base import Layer


class _Conv(Layer):
    """What Keras' convolutions share: filters, a kernel and an optional bias, an activation; a subclass says the
    kernel's shape for its input channels (``kernel_shape``) and convolves (``convolve``)."""
    channels_axis = None        # the input's channel axis for the data format; None: channel_axis

    def __init__(self, filters, kernel_size, strides, padding, data_format, activation, use_bias, kernel_initializer,
                 bias_initializer, kernel_regularizer=None, bias_regularizer=None, **kwargs):
        super().__init__(**kwargs)
        self.what = what = f"layer {self.name!r} ({type(self).__name__})"
        if isinstance(filters, bool) or not isinstance(filters, int) or filters <= 0:
            raise LayerError(f"{what}: filters expected a positive int, received {filters!r}")
        self.filters = filters
        self.data_format = standardize_data_format(data_format, what)
        self.activation = activations.get(activation, f"{what}: activation")
        self.use_bias = use_bias
        self.keep_kernel_and_bias(kernel_initializer, bias_initializer, kernel_regularizer, bias_regularizer)

    def _channel_axis(self):
        return channel_axis(self.data_format)

    def build(self, input_shape):
        axis = self._channel_axis()
        if input_shape[axis] is None:
            raise LayerError(f"{self.what}: expected a known channel count on axis {axis} ({self.data_format}), "
                             f"received shape {input_shape}")
        self.kernel = self.add_weight("kernel", self.kernel_shape(input_shape[axis]), self.kernel_initializer,
                                      regularizer=self.kernel_regularizer)
        self.bias = self.add_weight("bias", (self.filters,), self.bias_initializer,
                                    regularizer=self.bias_regularizer) if self.use_bias else None
        self.fix_feature_dims(**{f"axis_{axis}": input_shape[axis]})

    def call(self, x):
        y = self.convolve(x, self.read(self.kernel))
        if self.use_bias:
            y = bias_add(y, self.read(self.bias), axis=self._channel_axis())
        return self.activation(y)

    def get_config(self):
        return {**super().get_config(), "filters": self.filters, "kernel_size": self.kernel_size,
                "strides": self.strides, "padding": self.padding.lower(), "data_format": self.data_format,
                "activation": activations.name_of(self.activation), "use_bias": self.use_bias,
                **self.kernel_and_bias_config()}


class Conv2D(_Conv):
    input_ndim = 4

    def __init__(self, filters, kernel_size, strides=1, padding="valid", data_format="channels_last",
                 dilation_rate=1, activation=None, use_bias=True, kernel_initializer="glorot_uniform",
                 bias_initializer="zeros", kernel_regularizer=None, bias_regularizer=None, **kwargs):
        super().__init__(filters, kernel_size, strides, padding, data_format, activation, use_bias, kernel_initializer,
                         bias_initializer, kernel_regularizer, bias_regularizer, **kwargs)
        self.kernel_size = pair(kernel_size, self.what, "kernel_size")
        self.strides = pair(strides, self.what, "strides")
        self.dilation_rate = pair(dilation_rate, self.what, "dilation_rate")
        self.padding = standardize_padding(padding, self.what)

    def kernel_shape(self, channels):
        return self.kernel_size + (channels, self.filters)

    def convolve(self, x, kernel):
        return conv2d(x, kernel, self.strides, self.padding, self.data_format, self.dilation_rate)

    def get_config(self):
        return {**super().get_config(), "dilation_rate": self.dilation_rate}


class Conv1D(_Conv):
    """Keras' Conv1D: ``(N, W, C)`` (or ``(N, C, W)`` with ``data_format="channels_first"``); ``padding`` 'valid',
    'same' or 'causal' (zeros before the sequence only, so an output never sees a later step)."""
    input_ndim = 3

    def __init__(self, filters, kernel_size, strides=1, padding="valid", data_format="channels_last",
                 dilation_rate=1, activation=None, use_bias=True, kernel_initializer="glorot_uniform",
                 bias_initializer="zeros", kernel_regularizer=None, bias_regularizer=None, **kwargs):
        super().__init__(filters, kernel_size, strides, padding, data_format, activation, use_bias, kernel_initializer,
                         bias_initializer, kernel_regularizer, bias_regularizer, **kwargs)
        self.kernel_size, self.strides, self.dilation_rate = (
            _one(v, self.what, name) for v, name in ((kernel_size, "kernel_size"), (strides, "strides"),
                                                    (dilation_rate, "dilation_rate")))
        if not isinstance(padding, str) or padding.lower() not in ("valid", "same", "causal"):
            raise LayerError(f"{self.what}: padding expected 'valid', 'same' or 'causal', received {padding!r}")
        self.padding = padding.lower()

    def _channel_axis(self):
        return 1 if self.data_format == "NCHW" else 2

    def kernel_shape(self, channels):
        return (self.kernel_size, channels, self.filters)

    def convolve(self, x, kernel):
        first = self.data_format == "NCHW"
        n, c, w = (x.shape[0], x.shape[1], x.shape[2]) if first else (x.shape[0], x.shape[2], x.shape[1])
        if self.padding == "causal":
            left = (self.kernel_size - 1) * self.dilation_rate
            x = pad(x, [(0, 0), (0, 0), (left, 0)] if first else [(0, 0), (left, 0), (0, 0)])
            w = None if w is None else w + left
        rows = reshape(x, (n, c, 1, w) if first else (n, 1, w, c))
        y = conv2d(rows, reshape(kernel, (1,) + self.kernel.shape), (1, self.strides),
                        "SAME" if self.padding == "same" else "VALID", self.data_format, (1, self.dilation_rate))
        return reshape(y, (n, self.filters, y.shape[3]) if first else (n, y.shape[2], self.filters))

    def get_config(self):
        return {**super().get_config(), "dilation_rate": self.dilation_rate}


def _one(value, what, name):
    """An int, or a 1-tuple of one (Keras takes both)."""
    if isinstance(value, (tuple, list)) and len(value) == 1:
        value = value[0]
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise LayerError(f"{what}: {name} expected a positive int, received {value!r}")
    return value


class Conv2DTranspose(_Conv):
    """Keras' Conv2DTranspose: a (kh, kw, filters, in) kernel; output ``H * s`` ('same') or ``(H - 1) * s + kh``
    ('valid').  ``output_padding`` and dilations other than 1 are refused by name."""
    input_ndim = 4

    def __init__(self, filters, kernel_size, strides=1, padding="valid", output_padding=None,
                 data_format="channels_last", dilation_rate=1, activation=None, use_bias=True,
                 kernel_initializer="glorot_uniform", bias_initializer="zeros", kernel_regularizer=None,
                 bias_regularizer=None, **kwargs):
        super().__init__(filters, kernel_size, strides, padding, data_format, activation, use_bias, kernel_initializer,
                         bias_initializer, kernel_regularizer, bias_regularizer, **kwargs)
        if output_padding is not None:
            raise LayerError(f"{self.what}: output_padding={output_padding!r} is not supported; expected None")
        if pair(dilation_rate, self.what, "dilation_rate") != (1, 1):
            raise LayerError(f"{self.what}: dilation_rate={dilation_rate!r} is not supported; expected 1")
        self.kernel_size = pair(kernel_size, self.what, "kernel_size")
        self.strides = pair(strides, self.what, "strides")
        self.padding = standardize_padding(padding, self.what)

    def kernel_shape(self, channels):
        return self.kernel_size + (self.filters, channels)

    def convolve(self, x, kernel):
        return conv2d_transpose(x, kernel, self.strides, self.padding, self.data_format)

    def get_config(self):
        return {**super().get_config(), "output_padding": None, "dilation_rate": (1, 1)}


def keras_format(fmt):
    """A standardized data format ('NCHW', 'NHWC') in Keras' spelling."""
    return "channels_first" if fmt == "NCHW" else "channels_last"


def keras_data_format(value, what):
    """Keras' ``data_format``: None (channels_last), 'channels_last' or 'channels_first' (OneFlow's 'NHWC' and
    'NCHW' too), in Keras' spelling."""
    return keras_format(standardize_data_format("channels_last" if value is None else value, what))


class Conv3D(_Conv):
    """Keras' Conv3D: ``(N, D, H, W, C)`` (or ``(N, C, D, H, W)`` channels first); ``groups`` other than 1 is
    refused by name."""
    input_ndim = 5

    def __init__(self, filters, kernel_size, strides=(1, 1, 1), padding="valid", data_format=None,
                 dilation_rate=(1, 1, 1), groups=1, activation=None, use_bias=True,
                 kernel_initializer="glorot_uniform", bias_initializer="zeros", kernel_regularizer=None,
                 bias_regularizer=None, **kwargs):
        super().__init__(filters, kernel_size, strides, padding, data_format or "channels_last", activation,
                         use_bias, kernel_initializer, bias_initializer, kernel_regularizer, bias_regularizer,
                         **kwargs)
        if groups != 1:
            raise LayerError(f"{self.what}: groups={groups!r} is not supported; expected 1")
        self.kernel_size = ntuple(kernel_size, 3, self.what, "kernel_size")
        self.strides = ntuple(strides, 3, self.what, "strides")
        self.dilation_rate = ntuple(dilation_rate, 3, self.what, "dilation_rate")
        self.padding = standardize_padding(padding, self.what)

    def _channel_axis(self):
        return 1 if self.data_format == "NCHW" else 4

    def kernel_shape(self, channels):
        return self.kernel_size + (channels, self.filters)

    def convolve(self, x, kernel):
        return conv3d.conv3d(x, kernel, self.strides, self.padding, keras_format(self.data_format),
                             self.dilation_rate)

    def get_config(self):
        return {**super().get_config(), "data_format": keras_format(self.data_format),
                "dilation_rate": self.dilation_rate, "groups": 1}


class Conv1DTranspose(_Conv):
    """Keras' Conv1DTranspose: a (k, filters, in) kernel, run as a Conv2DTranspose over rows of height 1; output
    ``W * s`` ('same') or ``(W - 1) * s + k`` ('valid').  ``output_padding`` and dilations other than 1 are refused
    by name."""
    input_ndim = 3

    def __init__(self, filters, kernel_size, strides=1, padding="valid", output_padding=None, data_format=None,
                 dilation_rate=1, activation=None, use_bias=True, kernel_initializer="glorot_uniform",
                 bias_initializer="zeros", kernel_regularizer=None, bias_regularizer=None, **kwargs):
        super().__init__(filters, kernel_size, strides, padding, data_format or "channels_last", activation,
                         use_bias, kernel_initializer, bias_initializer, kernel_regularizer, bias_regularizer,
                         **kwargs)
        if output_padding is not None:
            raise LayerError(f"{self.what}: output_padding={output_padding!r} is not supported; expected None")
        if _one(dilation_rate, self.what, "dilation_rate") != 1:
            raise LayerError(f"{self.what}: dilation_rate={dilation_rate!r} is not supported; expected 1")
        self.kernel_size = _one(kernel_size, self.what, "kernel_size")
        self.strides = _one(strides, self.what, "strides")
        self.padding = standardize_padding(padding, self.what)

    def _channel_axis(self):
        return 1 if self.data_format == "NCHW" else 2

    def kernel_shape(self, channels):
        return (self.kernel_size, self.filters, channels)

    def convolve(self, x, kernel):
        first = self.data_format == "NCHW"
        n, c, w = (x.shape[0], x.shape[1], x.shape[2]) if first else (x.shape[0], x.shape[2], x.shape[1])
        rows = reshape(x, (n, c, 1, w) if first else (n, 1, w, c))
        y = conv2d_transpose(rows, reshape(kernel, (1,) + self.kernel.shape), (1, self.strides),
                                  self.padding, self.data_format)
        return reshape(y, (n, self.filters, y.shape[3]) if first else (n, y.shape[2], self.filters))

    def get_config(self):
        return {**super().get_config(), "data_format": keras_format(self.data_format), "output_padding": None,
                "dilation_rate": 1}
