"""Layers that regularise while training and pass values through otherwise: SpatialDropout1D/2D (whole channels
dropped), GaussianNoise, GaussianDropout, and ActivityRegularization (a penalty on the activity, added to the
loss).  Their draws are dropout's: seeded by (seed, op, step, replica), so reruns repeat them."""
import math

from ..errors import LayerError
from ..ops import elementwise, nn, reduce
from .base import Layer
from .convolution import keras_data_format


def _rate(value, what, name="rate"):
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value < 1:
        raise LayerError(f"{what}: {name} expected a number in [0, 1), received {value!r}")
    return float(value)


class SpatialDropout1D(Layer):
    """Dropout of whole channels: one draw per example and channel, ``(N, 1, C)``, for every step."""
    input_ndim = 3

    def __init__(self, rate, seed=None, **kwargs):
        super().__init__(**kwargs)
        self.rate, self.seed = _rate(rate, f"layer {self.name!r} (SpatialDropout1D)"), seed

    def noise_shape(self, x):
        return (None, 1, None)

    def call(self, x, training=None):
        return nn.dropout(x, self.rate, training=training, seed=self.seed, noise_shape=self.noise_shape(x))

    def get_config(self):
        return {**super().get_config(), "rate": self.rate, "seed": self.seed}


class SpatialDropout2D(SpatialDropout1D):
    """Dropout of whole feature maps: one draw per example and channel, for every row and column."""
    input_ndim = 4

    def __init__(self, rate, data_format=None, seed=None, **kwargs):
        super().__init__(rate, seed, **kwargs)
        self.data_format = keras_data_format(data_format, f"layer {self.name!r} (SpatialDropout2D)")

    def noise_shape(self, x):
        return (None, None, 1, 1) if self.data_format == "channels_first" else (None, 1, 1, None)

    def get_config(self):
        return {**super().get_config(), "data_format": self.data_format}


class GaussianNoise(Layer):
    """``x + stddev * N(0, 1)`` while training."""

    def __init__(self, stddev, seed=None, **kwargs):
        super().__init__(**kwargs)
        if isinstance(stddev, bool) or not isinstance(stddev, (int, float)) or stddev < 0:
            raise LayerError(f"layer {self.name!r} (GaussianNoise): stddev expected a number >= 0, received "
                             f"{stddev!r}")
        self.stddev, self.seed = float(stddev), seed

    def call(self, x, training=None):
        return nn.gaussian_noise(x, self.stddev, training=training, seed=self.seed)

    def get_config(self):
        return {**super().get_config(), "stddev": self.stddev, "seed": self.seed}


class GaussianDropout(Layer):
    """``x * N(1, rate / (1 - rate))`` while training: multiplicative noise of dropout's variance."""

    def __init__(self, rate, seed=None, **kwargs):
        super().__init__(**kwargs)
        self.rate, self.seed = _rate(rate, f"layer {self.name!r} (GaussianDropout)"), seed

    def call(self, x, training=None):
        stddev = math.sqrt(self.rate / (1.0 - self.rate))
        return nn.gaussian_noise(x, stddev, multiplicative=True, training=training, seed=self.seed)

    def get_config(self):
        return {**super().get_config(), "rate": self.rate, "seed": self.seed}


class ActivityRegularization(Layer):
    """The identity, whose output adds ``l1 * sum(|y|) + l2 * sum(y ** 2)`` over the batch, divided by the batch
    size (Keras 3), to the loss: per example, the sum over its own elements."""

    def __init__(self, l1=0.0, l2=0.0, **kwargs):
        super().__init__(**kwargs)
        for name, v in (("l1", l1), ("l2", l2)):
            if isinstance(v, bool) or not isinstance(v, (int, float)) or v < 0:
                raise LayerError(f"layer {self.name!r} (ActivityRegularization): {name} expected a number >= 0, "
                                 f"received {v!r}")
        self.l1, self.l2 = float(l1), float(l2)

    def call(self, x):
        return elementwise.identity(x)

    def activity_penalty(self, node):
        """The per-example penalty of the output of ``node`` (each of this layer's calls makes one node)."""
        y = node.outputs[0]
        axes = list(range(1, y.ndim))
        terms = [reduce.reduce_sum(f(y), axis=axes) * w if axes else f(y) * w
                 for f, w in ((elementwise.abs, self.l1), (elementwise.square, self.l2)) if w]
        return None if not terms else terms[0] if len(terms) == 1 else terms[0] + terms[1]

    def get_config(self):
        return {**super().get_config(), "l1": self.l1, "l2": self.l2}
