"""Keras' random image augmentation layers: RandomFlip, RandomRotation, RandomZoom, RandomTranslation and
RandomContrast, on ``(N, H, W, C)`` images (or channels first).  Each draws per example while training (in ``fit``,
or called with ``training=True``) and is the identity otherwise.  Draws are seeded as dropout's masks are (by the
seed, the op, the step and the replica), so reruns repeat them; they cannot equal Keras' own draws."""
from ..errors import LayerError
from ..ops import augment
from .base import Layer
from .convolution import keras_data_format

FLIP_MODES = {"horizontal": (True, False), "vertical": (False, True), "horizontal_and_vertical": (True, True)}


def _range(factor, what, name, bounds):
    """Keras' factor: a number f (the range (-|f|, |f|), cut at the lower bound) or a pair, sorted."""
    if isinstance(factor, (tuple, list)) and len(factor) == 2 and all(
            isinstance(f, (int, float)) and not isinstance(f, bool) for f in factor):
        lower, upper = sorted(float(f) for f in factor)
    elif isinstance(factor, (int, float)) and not isinstance(factor, bool) and bounds[0] <= factor <= bounds[1]:
        lower, upper = max(-abs(float(factor)), bounds[0]), abs(float(factor))
    else:
        lower = upper = None
    if lower is None or upper < bounds[0] or lower > bounds[1]:
        raise LayerError(f"{what}: {name} expected a number or a pair of numbers in [{bounds[0]}, {bounds[1]}], "
                         f"received {factor!r}")
    return lower, upper


class _Augmentation(Layer):
    input_ndim = 4

    def __init__(self, seed, data_format, **kwargs):
        super().__init__(**kwargs)
        self.what = f"layer {self.name!r} ({type(self).__name__})"
        self.seed = seed
        self.data_format = keras_data_format(data_format, self.what)

    def get_config(self):
        return {**super().get_config(), "seed": self.seed, "data_format": self.data_format}


class RandomFlip(_Augmentation):
    """With probability 1/2 per example, the image flipped left-right ('horizontal'), upside down ('vertical'), or
    both ('horizontal_and_vertical', one draw for both)."""

    def __init__(self, mode="horizontal_and_vertical", seed=None, data_format=None, **kwargs):
        super().__init__(seed, data_format, **kwargs)
        if mode not in FLIP_MODES:
            raise LayerError(f"{self.what}: mode expected one of {list(FLIP_MODES)}, received {mode!r}")
        self.mode = mode

    def call(self, x, training=None):
        horizontal, vertical = FLIP_MODES[self.mode]
        return augment.random_flip(x, horizontal, vertical, self.data_format, training, self.seed)

    def get_config(self):
        return {**super().get_config(), "mode": self.mode}


class RandomContrast(_Augmentation):
    """Per example a factor from U(1 - lower, 1 + upper) (``factor`` f: lower 0, upper f, as Keras 3 reads it):
    each channel's deviation from its mean over the image scaled by it, the result clipped to ``value_range``."""

    def __init__(self, factor, value_range=(0, 255), seed=None, data_format=None, **kwargs):
        super().__init__(seed, data_format, **kwargs)
        self.factor = _range(factor, self.what, "factor", (0.0, 1.0))
        if not (isinstance(value_range, (tuple, list)) and len(value_range) == 2 and all(
                isinstance(v, (int, float)) and not isinstance(v, bool) for v in value_range)
                and value_range[0] < value_range[1]):
            raise LayerError(f"{self.what}: value_range expected (low, high) with low < high, received "
                             f"{value_range!r}")
        self.value_range = tuple(value_range)

    def call(self, x, training=None):
        return augment.random_contrast(x, *self.factor, self.value_range, self.data_format, training, self.seed)

    def get_config(self):
        return {**super().get_config(), "factor": self.factor, "value_range": self.value_range}


class _Affine(_Augmentation):
    """An affine transform drawn per example, its empty area filled by ``fill_mode``: 'reflect', 'wrap',
    'constant' (``fill_value``) or 'nearest'; pixels read by 'bilinear' or 'nearest' interpolation."""
    kind = None

    def __init__(self, fill_mode, interpolation, seed, fill_value, data_format, **kwargs):
        super().__init__(seed, data_format, **kwargs)
        if fill_mode not in augment.FILL_MODES:
            raise LayerError(f"{self.what}: fill_mode expected one of {list(augment.FILL_MODES)}, received "
                             f"{fill_mode!r}")
        if interpolation not in augment.INTERPOLATIONS:
            raise LayerError(f"{self.what}: interpolation expected one of {list(augment.INTERPOLATIONS)}, received "
                             f"{interpolation!r}")
        if isinstance(fill_value, bool) or not isinstance(fill_value, (int, float)):
            raise LayerError(f"{self.what}: fill_value expected a number, received {fill_value!r}")
        self.fill_mode, self.interpolation, self.fill_value = fill_mode, interpolation, float(fill_value)

    def call(self, x, training=None):
        return augment.random_affine(x, self.kind, self.factors(), self.fill_mode, self.interpolation,
                                     self.fill_value, self.data_format, training, self.seed)

    def get_config(self):
        return {**super().get_config(), "fill_mode": self.fill_mode, "interpolation": self.interpolation,
                "fill_value": self.fill_value}


class RandomRotation(_Affine):
    """Rotation about the image's centre by ``360 * U(lower, upper)`` degrees; ``factor`` f means (-f, f)."""
    kind = "rotation"

    def __init__(self, factor, fill_mode="reflect", interpolation="bilinear", seed=None, fill_value=0.0,
                 data_format=None, **kwargs):
        super().__init__(fill_mode, interpolation, seed, fill_value, data_format, **kwargs)
        self.factor = _range(factor, self.what, "factor", (-1.0, 1.0))

    def factors(self):
        return self.factor

    def get_config(self):
        return {**super().get_config(), "factor": self.factor}


class _Scaled(_Affine):
    """A transform with a height factor and a width factor, each a number in (-1, 1] or a pair of them."""
    bounds = (-1.0, 1.0)

    def __init__(self, height_factor, width_factor, fill_mode, interpolation, seed, fill_value, data_format,
                 **kwargs):
        super().__init__(fill_mode, interpolation, seed, fill_value, data_format, **kwargs)
        self.height = _range(height_factor, self.what, "height_factor", self.bounds)
        self.width = None if width_factor is None else _range(width_factor, self.what, "width_factor", self.bounds)
        self.height_factor, self.width_factor = _plain(height_factor), _plain(width_factor)

    def factors(self):
        return self.height + (self.width or (None, None))

    def get_config(self):
        return {**super().get_config(), "height_factor": self.height_factor, "width_factor": self.width_factor}


def _plain(factor):
    return tuple(factor) if isinstance(factor, (tuple, list)) else factor


class RandomZoom(_Scaled):
    """Each image scaled about its centre by ``1 + U(lower, upper)`` along H, and along W by its own draw from
    ``width_factor`` (None: by the height's).  A positive factor zooms out, a negative one in."""
    kind = "zoom"

    def __init__(self, height_factor, width_factor=None, fill_mode="reflect", interpolation="bilinear", seed=None,
                 fill_value=0.0, data_format=None, **kwargs):
        super().__init__(height_factor, width_factor, fill_mode, interpolation, seed, fill_value, data_format,
                         **kwargs)


class RandomTranslation(_Scaled):
    """Each image moved by ``U(lower, upper) * H`` rows and ``U(lower, upper) * W`` columns (positive: down and
    right)."""
    kind = "translation"

    def __init__(self, height_factor, width_factor, fill_mode="reflect", interpolation="bilinear", seed=None,
                 fill_value=0.0, data_format=None, **kwargs):
        super().__init__(height_factor, width_factor, fill_mode, interpolation, seed, fill_value, data_format,
                         **kwargs)
        if self.width is None:
            raise LayerError(f"{self.what}: width_factor expected a number or a pair of numbers in [-1.0, 1.0], "
                             f"received None")
