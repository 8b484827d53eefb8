"""Flatten and Reshape (the batch dim is kept)."""
from ..errors import LayerError
from ..ops import shape as shape_ops
from .base import Layer


class Flatten(Layer):
    min_ndim = 1

    def call(self, x):
        return shape_ops.flatten(x)


class Reshape(Layer):
    def __init__(self, target_shape, **kwargs):
        super().__init__(**kwargs)
        if not isinstance(target_shape, (tuple, list)) or not all(isinstance(d, int) for d in target_shape):
            raise LayerError(f"layer {self.name!r} (Reshape): target_shape expected a tuple of ints, received "
                             f"{target_shape!r}")
        self.target_shape = tuple(target_shape)

    def call(self, x):
        return shape_ops.reshape(x, (x.shape[0],) + self.target_shape)

    def get_config(self):
        return {**super().get_config(), "target_shape": self.target_shape}
