"""Pooling: MaxPooling and AveragePooling in 1, 2 and 3 dims, and the global poolings (mean or max over every
spatial axis).  The 1-D poolings run the 2-D ops over rows of height 1, as Conv1D does; the 3-D ones have their
own ops."""
from ..errors import LayerError
from ..ops import conv3d, elementwise as ew, reduce
from ..ops.conv import avg_pool2d, max_pool2d, ntuple, pair, standardize_data_format, standardize_padding
from ..ops.shape import reshape
from .base import Layer
from .convolution import keras_data_format


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


class _Pool1D(Layer):
    """``(N, W, C)`` (or ``(N, C, W)`` channels first) pooled along W: the 2-D op over ``(N, 1, W, C)``."""
    input_ndim = 3
    op = None

    def __init__(self, pool_size, strides=None, padding="valid", data_format=None, **kwargs):
        super().__init__(**kwargs)
        what = f"layer {self.name!r} ({type(self).__name__})"
        (self.pool_size,) = ntuple(pool_size, 1, what, "pool_size")
        (self.strides,) = ntuple(self.pool_size if strides is None else strides, 1, what, "strides")
        self.padding = standardize_padding(padding, what).lower()
        self.data_format = keras_data_format(data_format, what)

    def call(self, x):
        first = self.data_format == "channels_first"
        n, c, w = (x.shape[0], x.shape[1], x.shape[2]) if first else (x.shape[0], x.shape[2], x.shape[1])
        rows = reshape(x, (n, c, 1, w) if first else (n, 1, w, c))
        y = type(self).op(rows, (1, self.pool_size), (1, self.strides), self.padding, "NCHW" if first else "NHWC")
        return reshape(y, (n, c, y.shape[3]) if first else (n, y.shape[2], c))

    def get_config(self):
        return {**super().get_config(), "pool_size": self.pool_size, "strides": self.strides,
                "padding": self.padding, "data_format": self.data_format}


class MaxPooling1D(_Pool1D):
    op = staticmethod(max_pool2d)

    def __init__(self, pool_size=2, strides=None, padding="valid", data_format=None, **kwargs):
        super().__init__(pool_size, strides, padding, data_format, **kwargs)


class AveragePooling1D(_Pool1D):
    op = staticmethod(avg_pool2d)


class _Pool3D(Layer):
    input_ndim = 5
    op = None

    def __init__(self, pool_size, strides=None, padding="valid", data_format=None, **kwargs):
        super().__init__(**kwargs)
        what = f"layer {self.name!r} ({type(self).__name__})"
        self.pool_size = ntuple(pool_size, 3, what, "pool_size")
        self.strides = ntuple(self.pool_size if strides is None else strides, 3, what, "strides")
        self.padding = standardize_padding(padding, what).lower()
        self.data_format = keras_data_format(data_format, what)

    def call(self, x):
        return type(self).op(x, self.pool_size, self.strides, self.padding, self.data_format)

    def get_config(self):
        return {**super().get_config(), "pool_size": self.pool_size, "strides": self.strides,
                "padding": self.padding, "data_format": self.data_format}


class MaxPooling3D(_Pool3D):
    op = staticmethod(conv3d.max_pool3d)

    def __init__(self, pool_size=(2, 2, 2), strides=None, padding="valid", data_format=None, **kwargs):
        super().__init__(pool_size, strides, padding, data_format, **kwargs)


class AveragePooling3D(_Pool3D):
    op = staticmethod(conv3d.avg_pool3d)


MaxPool1D, MaxPool3D, AvgPool1D, AvgPool3D = MaxPooling1D, MaxPooling3D, AveragePooling1D, AveragePooling3D


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


class _GlobalPool(Layer):
    """The mean (or max) over the steps (1-D) or D, H and W (3-D); ``keepdims`` keeps them as 1s."""
    op = None

    def __init__(self, data_format=None, keepdims=False, **kwargs):
        super().__init__(**kwargs)
        what = f"layer {self.name!r} ({type(self).__name__})"
        self.data_format = keras_data_format(data_format, what)
        if not isinstance(keepdims, bool):
            raise LayerError(f"{what}: keepdims expected True or False, received {keepdims!r}")
        self.keepdims = keepdims

    def _axes(self):
        spatial = range(1, self.input_ndim - 1)
        return [a + 1 for a in spatial] if self.data_format == "channels_first" else list(spatial)

    def call(self, x):
        return type(self).op(x, axis=self._axes(), keepdims=self.keepdims)

    def get_config(self):
        return {**super().get_config(), "data_format": self.data_format, "keepdims": self.keepdims}


class GlobalAveragePooling1D(_GlobalPool):
    """The mean over the steps; with a mask (``(N, steps)``, from ``Masking`` or given as ``mask=``) the mean of
    the steps it keeps, as Keras computes it."""
    input_ndim = 3
    op = staticmethod(reduce.reduce_mean)

    def call(self, x, mask=None):
        if mask is None:
            return super().call(x)
        axis = self._axes()[0]
        keep = reshape(ew.cast(mask, x.dtype), (mask.shape[0], 1, mask.shape[1]) if axis == 2 else
                                 (mask.shape[0], mask.shape[1], 1))
        return ew.divide(reduce.reduce_sum(ew.multiply(x, keep), axis=axis, keepdims=self.keepdims),
                         reduce.reduce_sum(keep, axis=axis, keepdims=self.keepdims))


class GlobalMaxPooling1D(_GlobalPool):
    input_ndim = 3
    op = staticmethod(reduce.reduce_max)


class GlobalAveragePooling3D(_GlobalPool):
    input_ndim = 5
    op = staticmethod(reduce.reduce_mean)


class GlobalMaxPooling3D(_GlobalPool):
    input_ndim = 5
    op = staticmethod(reduce.reduce_max)


GlobalAvgPool1D, GlobalMaxPool1D = GlobalAveragePooling1D, GlobalMaxPooling1D
GlobalAvgPool3D, GlobalMaxPool3D = GlobalAveragePooling3D, GlobalMaxPooling3D
