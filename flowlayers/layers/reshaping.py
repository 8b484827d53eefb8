"""Flatten, Reshape (the batch dim is kept), Permute, RepeatVector, UpSampling1D/2D, ZeroPadding1D/2D and
Cropping1D/2D."""
import numpy as np

from ..errors import LayerError, ShapeError
from ..ops import elementwise
from ..ops.conv import ntuple, pair, standardize_data_format
from ..ops.indexing import static_slice
from ..ops.shape import flatten, pad, reshape, transpose
from .base import Layer
from .convolution import keras_data_format


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


class Permute(Layer):
    """The non-batch dims reordered: ``dims`` a permutation of 1..rank-1 (Keras')."""

    def __init__(self, dims, **kwargs):
        super().__init__(**kwargs)
        dims = tuple(dims) if isinstance(dims, (tuple, list)) else dims
        if not isinstance(dims, tuple) or sorted(dims) != list(range(1, len(dims) + 1)):
            raise LayerError(f"layer {self.name!r} (Permute): dims expected a permutation of 1, 2, ..., n, received "
                             f"{dims!r}")
        self.dims = dims

    def call(self, x):
        if x.ndim != len(self.dims) + 1:
            raise LayerError(f"layer {self.name!r} (Permute): dims {self.dims} expected an input of rank "
                             f"{len(self.dims) + 1}, received shape {x.shape}")
        return transpose(x, (0,) + self.dims)

    def get_config(self):
        return {**super().get_config(), "dims": self.dims}


class RepeatVector(Layer):
    """``(N, F)`` -> ``(N, n, F)``: the vector repeated ``n`` times (a broadcast product with ones)."""
    input_ndim = 2

    def __init__(self, n, **kwargs):
        super().__init__(**kwargs)
        if isinstance(n, bool) or not isinstance(n, int) or n <= 0:
            raise LayerError(f"layer {self.name!r} (RepeatVector): n expected a positive int, received {n!r}")
        self.n = n

    def call(self, x):
        return _repeat(x, (x.shape[0], 1, x.shape[1]), (1, self.n, 1), (x.shape[0], self.n, x.shape[1]))

    def get_config(self):
        return {**super().get_config(), "n": self.n}


def _repeat(x, spread, ones, out):
    """``x`` reshaped to ``spread``, multiplied by ones of shape ``ones`` and reshaped to ``out``: each element
    repeated along the dims where ``ones`` is not 1, with every SBP of reshape and multiply."""
    y = elementwise.multiply(reshape(x, spread), elementwise.constant(np.ones(ones, np.float32), x.dtype))
    return reshape(y, out)


class UpSampling1D(Layer):
    """Each step repeated ``size`` times: ``(N, T, C)`` -> ``(N, T * size, C)``."""
    input_ndim = 3

    def __init__(self, size=2, **kwargs):
        super().__init__(**kwargs)
        (self.size,) = ntuple(size, 1, f"layer {self.name!r} (UpSampling1D)", "size")

    def call(self, x):
        n, t, c = x.shape
        return _repeat(x, (n, t, 1, c), (1, 1, self.size, 1), (n, None if t is None else t * self.size, c))

    def get_config(self):
        return {**super().get_config(), "size": self.size}


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
        return _repeat(x, spread, ones, out)

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


class ZeroPadding1D(Layer):
    """Zeros before and after the steps: ``padding`` an int or ``(before, after)``."""
    input_ndim = 3

    def __init__(self, padding=1, data_format=None, **kwargs):
        super().__init__(**kwargs)
        what = f"layer {self.name!r} (ZeroPadding1D)"
        self.padding = _one_pair(padding, what, "padding")
        self.data_format = keras_data_format(data_format, what)

    def call(self, x):
        first = self.data_format == "channels_first"
        return pad(x, [(0, 0), (0, 0), self.padding] if first else [(0, 0), self.padding, (0, 0)])

    def get_config(self):
        return {**super().get_config(), "padding": self.padding, "data_format": self.data_format}


class Cropping1D(Layer):
    """Steps cut from the start and the end: ``cropping`` an int or ``(start, end)``; ``(N, T, C)``."""
    input_ndim = 3

    def __init__(self, cropping=(1, 1), **kwargs):
        super().__init__(**kwargs)
        self.cropping = _one_pair(cropping, f"layer {self.name!r} (Cropping1D)", "cropping")

    def call(self, x):
        return _crop(x, [(0, 0), self.cropping, (0, 0)], self)

    def get_config(self):
        return {**super().get_config(), "cropping": self.cropping}


class Cropping2D(Layer):
    """Rows and columns cut from the edges: ``cropping`` an int, ``(rows, cols)`` or ``((top, bottom), (left,
    right))``."""
    input_ndim = 4

    def __init__(self, cropping=((0, 0), (0, 0)), data_format=None, **kwargs):
        super().__init__(**kwargs)
        what = f"layer {self.name!r} (Cropping2D)"
        self.cropping = _padding_pairs(cropping, what, "cropping")
        self.data_format = keras_data_format(data_format, what)

    def call(self, x):
        spatial = list(self.cropping)
        return _crop(x, [(0, 0), (0, 0)] + spatial if self.data_format == "channels_first" else
                     [(0, 0)] + spatial + [(0, 0)], self)

    def get_config(self):
        return {**super().get_config(), "cropping": self.cropping, "data_format": self.data_format}


def _crop(x, cuts, layer):
    """``x`` with ``(before, after)`` elements cut from each dim."""
    bounds = []
    for size, (before, after) in zip(x.shape, cuts):
        if size is None and (before or after):
            raise ShapeError(f"layer {layer.name!r} ({type(layer).__name__}): expected known sizes on the cropped "
                             f"dims, received shape {x.shape}")
        if size is not None and before + after >= size:
            raise ShapeError(f"layer {layer.name!r} ({type(layer).__name__}): cropping {layer.cropping} leaves "
                             f"nothing of input shape {x.shape}")
        bounds.append((before, None if size is None else size - after))
    return static_slice(x, [b for b, _ in bounds], [e for _, e in bounds])


def _one_pair(value, what, name):
    """An int ``v`` as ``(v, v)``, or a pair of ints >= 0."""
    pair = (value, value) if isinstance(value, int) and not isinstance(value, bool) else value
    if not (isinstance(pair, (tuple, list)) and len(pair) == 2 and all(
            isinstance(v, int) and not isinstance(v, bool) and v >= 0 for v in pair)):
        raise LayerError(f"{what}: {name} expected an int >= 0 or a pair of them, received {value!r}")
    return tuple(pair)


def _padding_pairs(padding, what, name="padding"):
    def count(v):
        return isinstance(v, int) and not isinstance(v, bool) and v >= 0

    if count(padding):
        return ((padding, padding), (padding, padding))
    if isinstance(padding, (tuple, list)) and len(padding) == 2:
        if all(count(v) for v in padding):
            return ((padding[0], padding[0]), (padding[1], padding[1]))
        if all(isinstance(p, (tuple, list)) and len(p) == 2 and all(count(v) for v in p) for p in padding):
            return tuple(tuple(p) for p in padding)
    raise LayerError(f"{what}: {name} expected an int >= 0, a pair of them or a pair of (before, after) pairs, "
                     f"received {padding!r}")
