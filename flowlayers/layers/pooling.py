"""MaxPool2D, AveragePooling2D, GlobalAveragePooling2D and GlobalMaxPooling2D."""
from ..ops import reduce
from ..ops.conv import avg_pool2d, max_pool2d, pair, standardize_data_format, standardize_padding
from .base import Layer


class _Pool2D(Layer):
    input_ndim = 4
    op = None

    def __init__(self, pool_size=2, strides=None, padding="valid", data_format="channels_last", **kwargs):
        super().__init__(**kwargs)
        what = f"layer {self.name!r} ({type(self).__name__})"
        self.pool_size = pair(pool_size, what, "pool_size")
        self.strides = pair(self.pool_size if strides is None else strides, what, "strides")
        self.padding = standardize_padding(padding, what)
        self.data_format = standardize_data_format(data_format, what)

    def call(self, x):
        return type(self).op(x, self.pool_size, self.strides, self.padding, self.data_format)

    def get_config(self):
        return {**super().get_config(), "pool_size": self.pool_size, "strides": self.strides,
                "padding": self.padding.lower(), "data_format": self.data_format}


class MaxPool2D(_Pool2D):
    op = staticmethod(max_pool2d)


class AveragePooling2D(_Pool2D):
    op = staticmethod(avg_pool2d)


MaxPooling2D = MaxPool2D
AvgPool2D = AveragePooling2D


class _GlobalPool2D(Layer):
    """The mean (or max) over H and W: ``(N, C)``, or ``(N, 1, 1, C)`` / ``(N, C, 1, 1)`` with ``keepdims``."""
    input_ndim = 4
    op = None

    def __init__(self, data_format="channels_last", keepdims=False, **kwargs):
        super().__init__(**kwargs)
        self.data_format = standardize_data_format(data_format, f"layer {self.name!r} ({type(self).__name__})")
        self.keepdims = bool(keepdims)

    def call(self, x):
        axes = [2, 3] if self.data_format == "NCHW" else [1, 2]
        return type(self).op(x, axis=axes, keepdims=self.keepdims)

    def get_config(self):
        return {**super().get_config(), "data_format": self.data_format, "keepdims": self.keepdims}


class GlobalAveragePooling2D(_GlobalPool2D):
    op = staticmethod(reduce.reduce_mean)


class GlobalMaxPooling2D(_GlobalPool2D):
    op = staticmethod(reduce.reduce_max)


GlobalAvgPool2D, GlobalMaxPool2D = GlobalAveragePooling2D, GlobalMaxPooling2D
