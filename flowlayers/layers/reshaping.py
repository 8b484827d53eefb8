"""Flatten, Reshape (the batch dim is kept), UpSampling2D and ZeroPadding2D."""
import numpy as np

from ..errors import LayerError
from ..ops import elementwise
from ..ops.conv import pair, standardize_data_format
from ..ops.shape import flatten, pad, reshape
from .base import Layer


class Flatten(Layer):
    min_ndim = 1

    def call(self, x):
        return flatten(x)


class Reshape(Layer):
    def __init__(self, target_shape, **kwargs):
        super().__init__(**kwargs)
        if not isinstance(target_shape, (tuple, list)) or not all(isinstance(d, int) for d in target_shape):
            raise LayerError(f"layer {self.name!r} (Reshape): target_shape expected a tuple of ints, received "
                             f"{target_shape!r}")
        self.target_shape = tuple(target_shape)

    def call(self, x):
        return reshape(x, (x.shape[0],) + self.target_shape)

    def get_config(self):
        return {**super().get_config(), "target_shape": self.target_shape}


class UpSampling2D(Layer):
    """Each row and column repeated ``size`` times (nearest neighbour): a reshape, a broadcast product with ones
    and a reshape, so every SBP of those ops carries over."""
    input_ndim = 4

    def __init__(self, size=(2, 2), data_format="channels_last", interpolation="nearest", **kwargs):
        super().__init__(**kwargs)
        what = f"layer {self.name!r} (UpSampling2D)"
        self.size = pair(size, what, "size")
        self.data_format = standardize_data_format(data_format, what)
        if interpolation != "nearest":
            raise LayerError(f"{what}: interpolation expected 'nearest' (the only one implemented), received "
                             f"{interpolation!r}")
        self.interpolation = interpolation

    def call(self, x):
        (sh, sw), n = self.size, x.shape[0]
        if self.data_format == "NCHW":
            _, c, h, w = x.shape
            spread, ones, out = (n, c, h, 1, w, 1), (1, 1, 1, sh, 1, sw), (n, c, h * sh, w * sw)
        else:
            _, h, w, c = x.shape
            spread, ones, out = (n, h, 1, w, 1, c), (1, 1, sh, 1, sw, 1), (n, h * sh, w * sw, c)
        y = elementwise.multiply(reshape(x, spread), elementwise.constant(np.ones(ones, np.float32),
                                                                                     x.dtype))
        return reshape(y, out)

    def get_config(self):
        return {**super().get_config(), "size": self.size, "data_format": self.data_format,
                "interpolation": self.interpolation}


class ZeroPadding2D(Layer):
    """Zeros around H and W: ``padding`` an int, ``(rows, cols)`` or ``((top, bottom), (left, right))``."""
    input_ndim = 4

    def __init__(self, padding=(1, 1), data_format="channels_last", **kwargs):
        super().__init__(**kwargs)
        what = f"layer {self.name!r} (ZeroPadding2D)"
        self.padding = _padding_pairs(padding, what)
        self.data_format = standardize_data_format(data_format, what)

    def call(self, x):
        (top, bottom), (left, right) = self.padding
        spatial = [(top, bottom), (left, right)]
        pairs = [(0, 0), (0, 0)] + spatial if self.data_format == "NCHW" else [(0, 0)] + spatial + [(0, 0)]
        return pad(x, pairs)

    def get_config(self):
        return {**super().get_config(), "padding": self.padding, "data_format": self.data_format}


def _padding_pairs(padding, what):
    def count(v):
        return isinstance(v, int) and not isinstance(v, bool) and v >= 0

    if count(padding):
        return ((padding, padding), (padding, padding))
    if isinstance(padding, (tuple, list)) and len(padding) == 2:
        if all(count(v) for v in padding):
            return ((padding[0], padding[0]), (padding[1], padding[1]))
        if all(isinstance(p, (tuple, list)) and len(p) == 2 and all(count(v) for v in p) for p in padding):
            return tuple(tuple(p) for p in padding)
    raise LayerError(f"{what}: padding expected an int >= 0, a pair of them or a pair of (before, after) pairs, "
                     f"received {padding!r}")
