"""BatchNormalization, LayerNormalization, GroupNormalization and UnitNormalization."""
import numpy as np

from .. import dtypes, initializers, mixed_precision, regularizers
from ..errors import LayerError, ShapeError
from ..ops import elementwise, reduce
from ..ops.norm import batch_norm, layer_norm
from ..ops.shape import reshape
from .base import Layer


def upcast(x):
    """``x`` in at least float32 (Keras' normalisation layers compute their statistics so under a 16-bit policy)."""
    return elementwise.cast(x, dtypes.float32) if mixed_precision.half(x.dtype) else x


def read_as(layer, var, like):
    """``var`` read without autocast, in ``like``'s dtype."""
    blob = layer.read(var, autocast=False)
    return blob if blob.dtype == like.dtype else elementwise.cast(blob, like.dtype)


def in_compute_dtype(layer, y):
    """A normalisation layer's output in its compute dtype (computed in at least float32)."""
    return y if y.dtype == layer.compute_dtype or not layer.compute_dtype.is_floating else \
        elementwise.cast(y, layer.compute_dtype)


class BatchNormalization(Layer):
    """Keras' BatchNormalization; the moving statistics are updated by the train step.

    In the mirrored view each replica normalises with its own batch statistics
    (as OneFlow's mirrored view does) and the moving statistics take the mean
    of the replicas' updates; the consistent view uses the whole logical batch.
    Under a 16-bit policy the input is taken as it comes and normalised in float32, as Keras does.
    """
    autocast = False

    def __init__(self, axis=-1, momentum=0.99, epsilon=1e-3, center=True, scale=True,
                 beta_initializer="zeros", gamma_initializer="ones", moving_mean_initializer="zeros",
                 moving_variance_initializer="ones", **kwargs):
        super().__init__(**kwargs)
        self.axis, self.momentum, self.epsilon = axis, float(momentum), float(epsilon)
        self.center, self.scale = center, scale
        self.inits = {k: initializers.get(v) for k, v in (
            ("gamma", gamma_initializer), ("beta", beta_initializer), ("moving_mean", moving_mean_initializer),
            ("moving_variance", moving_variance_initializer))}

    def build(self, input_shape):
        self.axis %= len(input_shape)
        dim = (input_shape[self.axis],)
        self.gamma = self.add_weight("gamma", dim, self.inits["gamma"]) if self.scale else None
        self.beta = self.add_weight("beta", dim, self.inits["beta"]) if self.center else None
        self.moving_mean = self.add_weight("moving_mean", dim, self.inits["moving_mean"], trainable=False)
        self.moving_variance = self.add_weight("moving_variance", dim, self.inits["moving_variance"],
                                               trainable=False)
        self.fix_feature_dims(**{f"axis_{self.axis}": input_shape[self.axis]})

    def call(self, x, training=None):
        x = upcast(x)
        dim = (x.shape[self.axis],)
        gamma = read_as(self, self.gamma, x) if self.scale else elementwise.constant([1.0] * dim[0], x.dtype)
        beta = read_as(self, self.beta, x) if self.center else elementwise.constant([0.0] * dim[0], x.dtype)
        y, new_mean, new_var = batch_norm(x, gamma, beta, read_as(self, self.moving_mean, x),
                                               read_as(self, self.moving_variance, x), self.axis, self.momentum,
                                               self.epsilon, training)
        y.node.updates = {1: self.moving_mean, 2: self.moving_variance}
        return in_compute_dtype(self, y)

    def get_config(self):
        return {**super().get_config(), "axis": self.axis, "momentum": self.momentum, "epsilon": self.epsilon,
                "center": self.center, "scale": self.scale,
                **{f"{k}_initializer": initializers.serialize(v) for k, v in self.inits.items()}}


class LayerNormalization(Layer):
    """Keras' LayerNormalization; under a 16-bit policy it normalises in float32, as Keras does."""
    autocast = False

    def __init__(self, axis=-1, epsilon=1e-3, center=True, scale=True, beta_initializer="zeros",
                 gamma_initializer="ones", **kwargs):
        super().__init__(**kwargs)
        self.axis = tuple(axis) if isinstance(axis, (list, tuple)) else (axis,)
        self.epsilon, self.center, self.scale = float(epsilon), center, scale
        self.gamma_initializer = initializers.get(gamma_initializer)
        self.beta_initializer = initializers.get(beta_initializer)

    def build(self, input_shape):
        self.axis = tuple(sorted(a % len(input_shape) for a in self.axis))
        shape = tuple(input_shape[a] for a in self.axis)
        self.gamma = self.add_weight("gamma", shape, self.gamma_initializer) if self.scale else None
        self.beta = self.add_weight("beta", shape, self.beta_initializer) if self.center else None
        self.fix_feature_dims(**{f"axis_{a}": input_shape[a] for a in self.axis})

    def call(self, x):
        x = upcast(x)
        shape = tuple(x.shape[a] for a in self.axis)
        gamma = read_as(self, self.gamma, x) if self.scale else elementwise.constant(np.ones(shape), x.dtype)
        beta = read_as(self, self.beta, x) if self.center else elementwise.constant(np.zeros(shape), x.dtype)
        return in_compute_dtype(self, layer_norm(x, gamma, beta, self.axis, self.epsilon))

    def get_config(self):
        return {**super().get_config(), "axis": self.axis, "epsilon": self.epsilon, "center": self.center,
                "scale": self.scale, "gamma_initializer": initializers.serialize(self.gamma_initializer),
                "beta_initializer": initializers.serialize(self.beta_initializer)}


class GroupNormalization(Layer):
    """Keras' GroupNormalization: the channels on ``axis`` cut into ``groups`` (-1: one per channel), each
    example's group normalised over its channels and every other non-batch axis, then ``gamma`` and ``beta`` per
    channel; in float32 under a 16-bit policy, as Keras does."""
    autocast = False

    def __init__(self, groups=32, axis=-1, epsilon=1e-3, center=True, scale=True, beta_initializer="zeros",
                 gamma_initializer="ones", beta_regularizer=None, gamma_regularizer=None, **kwargs):
        super().__init__(**kwargs)
        self.what = what = f"layer {self.name!r} (GroupNormalization)"
        if isinstance(groups, bool) or not isinstance(groups, int) or not (groups > 0 or groups == -1):
            raise LayerError(f"{what}: groups expected a positive int or -1, received {groups!r}")
        if isinstance(axis, bool) or not isinstance(axis, int):
            raise LayerError(f"{what}: axis expected an int, received {axis!r}")
        for arg, v in (("center", center), ("scale", scale)):
            if not isinstance(v, bool):
                raise LayerError(f"{what}: {arg} expected True or False, received {v!r}")
        self.groups, self.axis, self.epsilon, self.center, self.scale = groups, axis, float(epsilon), center, scale
        self.beta_initializer = initializers.get(beta_initializer)
        self.gamma_initializer = initializers.get(gamma_initializer)
        self.beta_regularizer = regularizers.get(beta_regularizer, f"{what}: beta_regularizer")
        self.gamma_regularizer = regularizers.get(gamma_regularizer, f"{what}: gamma_regularizer")

    def build(self, input_shape):
        axis = self.axis % len(input_shape)
        dim = input_shape[axis]
        groups = dim if self.groups == -1 else self.groups
        if axis == 0 or dim is None or dim % groups:
            raise ShapeError(f"{self.what}: expected a known channel count on axis {self.axis} that divides into "
                             f"{groups} groups, received shape {input_shape}")
        self.gamma = self.add_weight("gamma", (dim,), self.gamma_initializer,
                                     regularizer=self.gamma_regularizer) if self.scale else None
        self.beta = self.add_weight("beta", (dim,), self.beta_initializer,
                                    regularizer=self.beta_regularizer) if self.center else None
        self.fix_feature_dims(**{f"axis_{axis}": dim})

    def call(self, x):
        x = upcast(x)
        axis = self.axis % x.ndim
        dim = x.shape[axis]
        groups = dim if self.groups == -1 else self.groups
        grouped = x.shape[:axis] + (groups, dim // groups) + x.shape[axis + 1:]
        xg = reshape(x, grouped)
        over = [a for a in range(1, len(grouped)) if a != axis]
        mean = reduce.reduce_mean(xg, axis=over, keepdims=True)
        centred = elementwise.subtract(xg, mean)
        variance = reduce.reduce_mean(elementwise.square(centred), axis=over, keepdims=True)
        y = elementwise.multiply(centred, elementwise.rsqrt(elementwise.add(variance, self.epsilon)))
        per_channel = [1] * len(grouped)
        per_channel[axis:axis + 2] = [groups, dim // groups]
        if self.scale:
            y = elementwise.multiply(y, reshape(read_as(self, self.gamma, x), per_channel))
        if self.center:
            y = elementwise.add(y, reshape(read_as(self, self.beta, x), per_channel))
        return in_compute_dtype(self, reshape(y, x.shape))

    def get_config(self):
        return {**super().get_config(), "groups": self.groups, "axis": self.axis, "epsilon": self.epsilon,
                "center": self.center, "scale": self.scale,
                "beta_initializer": initializers.serialize(self.beta_initializer),
                "gamma_initializer": initializers.serialize(self.gamma_initializer),
                "beta_regularizer": regularizers.serialize(self.beta_regularizer),
                "gamma_regularizer": regularizers.serialize(self.gamma_regularizer)}


def l2_normalize(x, axis, epsilon=1e-12):
    """Keras' ``normalize(x, axis, order=2)``: ``x * min(rsqrt(sum(x ** 2)), 1 / epsilon)`` along ``axis``."""
    inverse = elementwise.rsqrt(reduce.reduce_sum(elementwise.square(x), axis=axis, keepdims=True))
    return elementwise.multiply(x, elementwise.minimum(inverse, 1.0 / epsilon))


class UnitNormalization(Layer):
    """Each example scaled to unit L2 norm along ``axis`` (an int or a list of them)."""

    def __init__(self, axis=-1, **kwargs):
        super().__init__(**kwargs)
        ok = isinstance(axis, int) or isinstance(axis, (list, tuple)) and axis and all(
            isinstance(a, int) for a in axis)
        if not ok or isinstance(axis, bool):
            raise LayerError(f"layer {self.name!r} (UnitNormalization): axis expected an int or a list of ints, "
                             f"received {axis!r}")
        self.axis = list(axis) if isinstance(axis, (list, tuple)) else axis

    def call(self, x):
        return l2_normalize(x, self.axis)

    def get_config(self):
        return {**super().get_config(), "axis": self.axis}
