"""BatchNormalization and LayerNormalization."""
from .. import initializers
from ..ops import elementwise
from ..ops.norm import batch_norm, layer_norm
from .base import Layer


class BatchNormalization(Layer):
    """Keras' BatchNormalization; the moving statistics are updated by the train step.

    In the mirrored view each replica normalises with its own batch statistics
    (as OneFlow's mirrored view does) and the moving statistics take the mean
    of the replicas' updates; the consistent view uses the whole logical batch.
    """

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
        dim = (x.shape[self.axis],)
        gamma = self.read(self.gamma) if self.scale else elementwise.constant([1.0] * dim[0], x.dtype)
        beta = self.read(self.beta) if self.center else elementwise.constant([0.0] * dim[0], x.dtype)
        y, new_mean, new_var = batch_norm(x, gamma, beta, self.read(self.moving_mean),
                                               self.read(self.moving_variance), self.axis, self.momentum,
                                               self.epsilon, training)
        y.node.updates = {1: self.moving_mean, 2: self.moving_variance}
        return y

    def get_config(self):
        return {**super().get_config(), "axis": self.axis, "momentum": self.momentum, "epsilon": self.epsilon,
                "center": self.center, "scale": self.scale,
                **{f"{k}_initializer": initializers.serialize(v) for k, v in self.inits.items()}}


class LayerNormalization(Layer):
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
        import numpy as np

        shape = tuple(x.shape[a] for a in self.axis)
        gamma = self.read(self.gamma) if self.scale else elementwise.constant(np.ones(shape), x.dtype)
        beta = self.read(self.beta) if self.center else elementwise.constant(np.zeros(shape), x.dtype)
        return layer_norm(x, gamma, beta, self.axis, self.epsilon)

    def get_config(self):
        return {**super().get_config(), "axis": self.axis, "epsilon": self.epsilon, "center": self.center,
                "scale": self.scale, "gamma_initializer": initializers.serialize(self.gamma_initializer),
                "beta_initializer": initializers.serialize(self.beta_initializer)}
