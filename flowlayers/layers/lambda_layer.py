"""Lambda (a function of Blobs as a layer) and Identity.

A Lambda's function is code: a model holding one is not saved (``get_config`` refuses it by name), since
flowlayers loads no code from files; write a Layer subclass and give it to ``load_model`` in ``custom_objects``.
"""
from ..errors import LayerError, ShapeError
from ..ops import elementwise
from .base import Layer


class Lambda(Layer):
    """``Lambda(fn)(x)`` is ``fn(x, **arguments)``, ``fn`` made of flowlayers ops.  ``output_shape`` (without the
    batch dim), where given, is checked against what ``fn`` returns; ``mask`` is refused by name."""

    def __init__(self, function, output_shape=None, mask=None, arguments=None, **kwargs):
        super().__init__(**kwargs)
        what = f"layer {self.name!r} (Lambda)"
        if not callable(function):
            raise LayerError(f"{what}: function expected a callable, received {function!r}")
        if mask is not None:
            raise LayerError(f"{what}: mask={mask!r} is not supported; expected None")
        if arguments is not None and not isinstance(arguments, dict):
            raise LayerError(f"{what}: arguments expected a dict of keyword arguments, received {arguments!r}")
        if output_shape is not None and not (isinstance(output_shape, (tuple, list)) and all(
                d is None or isinstance(d, int) for d in output_shape)):
            raise LayerError(f"{what}: output_shape expected a tuple of dims (None for unknown), received "
                             f"{output_shape!r}")
        self.function, self.arguments = function, dict(arguments or {})
        self.output_shape = None if output_shape is None else tuple(output_shape)

    def call(self, inputs):
        y = self.function(inputs, **self.arguments)
        if self.output_shape is not None and tuple(y.shape[1:]) != self.output_shape:
            raise ShapeError(f"layer {self.name!r} (Lambda): output_shape {self.output_shape} expected, its function "
                             f"returned shape {y.shape}")
        return y

    def get_config(self):
        name = getattr(self.function, "__qualname__", type(self.function).__name__)
        raise LayerError(f"layer {self.name!r} (Lambda): its function {name!r} is code, which flowlayers does not "
                         f"save (a load runs no code from the file); expected a Layer subclass instead, given to "
                         f"load_model in custom_objects")


class Identity(Layer):
    def call(self, x):
        return elementwise.identity(x)
