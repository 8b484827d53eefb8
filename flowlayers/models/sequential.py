"""Sequential: a stack of layers, each feeding the next.

    model = flow.Sequential([
        flow.Input((784,)),
        flow.layers.Dense(128, activation="relu"),
        flow.layers.Dense(10),
    ])

Without an Input (or ``input_shape=`` on the first layer) the model is built
from the first data it sees.
"""
from ..errors import GraphError, LayerError
from ..framework.blob import Blob
from ..inputs import Input
from ..layers.base import Layer
from . import saving
from .model import Model


class Sequential(Model):
    def __init__(self, layers=None, name=None):
        super().__init__(name=name or "sequential")
        self._stack, self._input = [], None
        for layer in layers or []:
            self.add(layer)

    def add(self, layer):
        if isinstance(layer, Blob):
            if self._stack or self._input is not None:
                raise GraphError(f"Sequential {self.name!r}: an Input is allowed only as the first element")
            self._input = layer
        elif isinstance(layer, Layer):
            self._stack.append(layer)
            if self._input is None and len(self._stack) == 1 and layer.input_shape_arg is not None:
                shape = layer.input_shape_arg
                self._input = Input(shape[1:], batch_size=shape[0])
        else:
            raise LayerError(f"Sequential {self.name!r}.add: expected a layer or flow.Input, received "
                             f"{type(layer).__name__}")
        if self._input is not None and self._stack:
            self._rebuild()

    def _model_spec(self, owners, objects):
        """The architecture ``model.save`` writes: the input and the layers in order."""
        if type(self) is not Sequential:
            raise LayerError(f"Model {self.name!r}: saving a subclass of Sequential ({type(self).__name__}) is not "
                             f"supported; expected a flow.Model built from Inputs or a flow.Sequential (save_weights "
                             f"saves any model's weights)")
        return {"class_name": "Sequential", "name": self.name, "input": saving.input_spec(self._input),
                "layers": [saving.owner(layer, owners, objects) for layer in self._stack]}

    def _rebuild(self):
        x = self._input
        for layer in self._stack:
            x = layer(x)
        self._init_graph(self._input, x)

    def build(self, input_shape, dtypes=None):
        """Built on an Input of ``input_shape`` (batch dim first; ``dtypes``: its dtype, default float32): from the
        first data it sees, or at its first call on a Blob, as Keras builds a Sequential without an Input."""
        if self.built or not self._stack:
            return
        self._input = Input(tuple(input_shape[1:]), batch_size=input_shape[0],
                            dtype=(dtypes or ["float32"])[0])
        self._rebuild()

    def _builds_from_data(self):
        return True

    @property
    def layers(self):
        return list(self._stack)
