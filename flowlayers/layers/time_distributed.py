"""TimeDistributed: one layer applied to every time step of a sequence, with the same weights at each step.

The steps are folded into the batch (``(batch, time, ...) -> (batch * time, ...)``), the layer is called once on
that, and its output unfolded (``-> (batch, time, ...)``): what Keras 3 computes step by step, for any layer whose
examples do not interact (not BatchNormalization in training, whose statistics Keras takes per step).  The
layer's weights are its own, at its own paths (``dense/kernel``).
"""
from ..errors import LayerError, ShapeError, describe_shape
from ..framework.blob import Blob
from ..ops.shape import reshape
from ..serialization import object_spec
from .base import Layer


class TimeDistributed(Layer):
    """Keras' ``TimeDistributed(layer)``: ``layer`` on every step of dim 1 of an input of rank 3 or more."""

    def __init__(self, layer, **kwargs):
        super().__init__(**kwargs)
        self.what = f"layer {self.name!r} (TimeDistributed)"
        if not isinstance(layer, Layer):
            raise LayerError(f"{self.what}: layer expected a flowlayers layer, received {layer!r}")
        self.layer = layer
        layer.trainable = layer.trainable and self.trainable

    @property
    def weights(self):
        return self.layer.weights

    @property
    def trainable(self):
        return self._trainable

    @trainable.setter
    def trainable(self, value):
        self._trainable = bool(value)
        self.layer.trainable = value

    def call(self, x, training=None):
        if not isinstance(x, Blob) or x.ndim < 3 or x.shape[1] is None:
            raise ShapeError(f"{self.what}: expected one input of shape (batch, time, ...) with a known number of "
                             f"time steps, received "
                             f"{describe_shape(x.shape) if isinstance(x, Blob) else type(x).__name__}")
        # ``None`` for the folded dim: the rows of each device's batch, times the steps (``-1`` there, as a
        # reshape that keeps its batch); the planner counts it as the batch
        y = self.layer(reshape(x, (None,) + x.shape[2:]), training=training)
        if not isinstance(y, Blob):
            raise LayerError(f"{self.what}: expected a layer with one output, received {len(y)} outputs from "
                             f"layer {self.layer.name!r}")
        return reshape(y, (None, x.shape[1]) + y.shape[1:])

    def get_config(self):
        return {**super().get_config(), "layer": object_spec(self.layer, self.what)}

    @classmethod
    def from_config(cls, config):
        config = dict(config)
        config["layer"] = layer_class(config["layer"]).from_config(dict(config["layer"]["config"]))
        return cls(**config)


def layer_class(spec):
    """The flowlayers layer class a saved ``{"class_name", "module", "config"}`` names (a class of another module,
    a user's, is not looked for: nothing read back is taken for code)."""
    found = [c for c in _subclasses(Layer) if c.__name__ == spec.get("class_name")
             and c.__module__ == spec.get("module") and c.__module__.startswith("flowlayers.")]
    if not found:
        raise LayerError(f"TimeDistributed.from_config: layer expected a saved flowlayers layer, received class "
                         f"{spec.get('class_name')!r} of module {spec.get('module')!r}")
    return found[0]


def _subclasses(cls):
    for sub in cls.__subclasses__():
        yield sub
        yield from _subclasses(sub)
