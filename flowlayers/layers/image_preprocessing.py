"""Keras' image resizing layers: Resizing and CenterCrop, on ``(N, H, W, C)`` (or channels first).

A resize is linear in the image, so it is two products with constant matrices (``flow.einsum``), one along H and
one along W; each row of a matrix holds one output pixel's weights, computed here as TF and JAX resize: pixel
centres at half-integers, no antialiasing; 'bilinear' interpolates between the two nearest input pixels (clamped at
the edges), 'nearest' takes the pixel whose cell holds the output centre.  Every SBP of einsum carries over:
batch and channels split alike.
"""
import numpy as np

from ..errors import LayerError, ShapeError
from ..ops import elementwise
from ..ops.indexing import static_slice
from ..ops.einsum import einsum
from .base import Layer
from .convolution import keras_data_format


def interpolation_matrix(size, out, method):
    """(out, size) weights: output pixel i from the input pixels of one dim."""
    scale = np.float32(size) / np.float32(out)
    centres = (np.arange(out, dtype=np.float32) + np.float32(0.5)) * scale
    m = np.zeros((out, size), np.float32)
    if method == "nearest":
        m[np.arange(out), np.minimum(np.floor(centres).astype(int), size - 1)] = 1.0
        return m
    src = np.clip(centres - np.float32(0.5), 0.0, size - 1)
    low = np.floor(src).astype(int)
    high = np.minimum(low + 1, size - 1)
    frac = src - low
    np.add.at(m, (np.arange(out), low), 1.0 - frac)
    np.add.at(m, (np.arange(out), high), frac)
    return m


def resize(x, height, width, method, channels_first):
    """``x`` resized to ``(height, width)`` by ``method`` ('bilinear' or 'nearest')."""
    h_axis = 2 if channels_first else 1
    size_h, size_w = x.shape[h_axis], x.shape[h_axis + 1]
    terms = "nchw" if channels_first else "nhwc"
    if (size_h, size_w) != (height, width):
        rows = einsum(f"{terms},Hh->{terms.replace('h', 'H')}", x, _constant(interpolation_matrix(
            size_h, height, method), x))
        x = einsum(f"{terms.replace('h', 'H')},Ww->{terms.replace('h', 'H').replace('w', 'W')}", rows,
                          _constant(interpolation_matrix(size_w, width, method), x))
    return x


def _constant(m, like):
    return elementwise.constant(m, like.dtype)


def aspect_crop(x, height, width, channels_first):
    """The central part of ``x`` with the aspect ratio ``height : width`` (Keras' ``crop_to_aspect_ratio``)."""
    h_axis = 2 if channels_first else 1
    size_h, size_w = x.shape[h_axis], x.shape[h_axis + 1]
    crop_h = max(min(size_h, int(float(size_w * height) / width)), 1)
    crop_w = max(min(size_w, int(float(size_h * width) / height)), 1)
    return center_slice(x, crop_h, crop_w, channels_first)


def center_slice(x, height, width, channels_first):
    h_axis = 2 if channels_first else 1
    top = int(float(x.shape[h_axis] - height) / 2)
    left = int(float(x.shape[h_axis + 1] - width) / 2)
    if (top, left, height, width) == (0, 0) + tuple(x.shape[h_axis:h_axis + 2]):
        return x
    bounds = [(0, None)] + [(0, d) for d in x.shape[1:]]
    bounds[h_axis], bounds[h_axis + 1] = (top, top + height), (left, left + width)
    return static_slice(x, [b for b, _ in bounds], [e for _, e in bounds])


class _Image(Layer):
    input_ndim = 4

    def __init__(self, height, width, data_format, **kwargs):
        super().__init__(**kwargs)
        self.what = what = f"layer {self.name!r} ({type(self).__name__})"
        for name, v in (("height", height), ("width", width)):
            if isinstance(v, bool) or not isinstance(v, int) or v <= 0:
                raise LayerError(f"{what}: {name} expected a positive int, received {v!r}")
        self.height, self.width = height, width
        self.data_format = keras_data_format(data_format, what)

    def _check_known(self, x):
        first = self.data_format == "channels_first"
        if None in x.shape[1:]:
            raise ShapeError(f"{self.what}: expected images of known size, received shape {x.shape}")
        return first


class Resizing(_Image):
    """Images resized to ``(height, width)`` by 'bilinear' or 'nearest' interpolation (others and antialiasing are
    refused by name); ``crop_to_aspect_ratio`` first takes the largest central part of the target's aspect ratio;
    ``pad_to_aspect_ratio`` is refused by name (``fill_mode`` and ``fill_value`` are what it would pad with)."""

    def __init__(self, height, width, interpolation="bilinear", crop_to_aspect_ratio=False, pad_to_aspect_ratio=False,
                 fill_mode="constant", fill_value=0.0, antialias=False, data_format=None, **kwargs):
        super().__init__(height, width, data_format, **kwargs)
        what = self.what
        if interpolation not in ("bilinear", "nearest"):
            raise LayerError(f"{what}: interpolation expected 'bilinear' or 'nearest' (the ones implemented), "
                             f"received {interpolation!r}")
        for name, v in (("crop_to_aspect_ratio", crop_to_aspect_ratio), ("pad_to_aspect_ratio", pad_to_aspect_ratio),
                        ("antialias", antialias)):
            if not isinstance(v, bool):
                raise LayerError(f"{what}: {name} expected True or False, received {v!r}")
        if pad_to_aspect_ratio or antialias:
            raise LayerError(f"{what}: {'pad_to_aspect_ratio' if pad_to_aspect_ratio else 'antialias'}=True is not "
                             f"supported; expected False")
        if fill_mode != "constant" or isinstance(fill_value, bool) or not isinstance(fill_value, (int, float)):
            raise LayerError(f"{what}: expected fill_mode 'constant' and a number fill_value, received "
                             f"{fill_mode!r} and {fill_value!r}")
        self.interpolation, self.crop_to_aspect_ratio = interpolation, crop_to_aspect_ratio
        self.fill_mode, self.fill_value = fill_mode, float(fill_value)

    def call(self, x):
        first = self._check_known(x)
        if self.crop_to_aspect_ratio:
            x = aspect_crop(x, self.height, self.width, first)
        return resize(x, self.height, self.width, self.interpolation, first)

    def get_config(self):
        return {**super().get_config(), "height": self.height, "width": self.width,
                "interpolation": self.interpolation, "crop_to_aspect_ratio": self.crop_to_aspect_ratio,
                "pad_to_aspect_ratio": False, "fill_mode": self.fill_mode, "fill_value": self.fill_value,
                "antialias": False, "data_format": self.data_format}


class CenterCrop(_Image):
    """The central ``(height, width)`` of each image; an image smaller than that on some side is first cropped
    to the target's aspect ratio and resized (bilinear) to it, as Keras does."""

    def __init__(self, height, width, data_format=None, **kwargs):
        super().__init__(height, width, data_format, **kwargs)

    def call(self, x):
        first = self._check_known(x)
        h_axis = 2 if first else 1
        if x.shape[h_axis] >= self.height and x.shape[h_axis + 1] >= self.width:
            return center_slice(x, self.height, self.width, first)
        return resize(aspect_crop(x, self.height, self.width, first), self.height, self.width, "bilinear", first)

    def get_config(self):
        return {**super().get_config(), "height": self.height, "width": self.width,
                "data_format": self.data_format}
