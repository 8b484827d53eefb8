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
        self._programs = {}

    def _build_from_data(self, x):
        if self.built or not self._stack:
            return
        import numpy as np

        first = x[0] if isinstance(x, (list, tuple)) else x
        if hasattr(first, "element_spec"):
            shape, dtype = tuple(first.element_spec[0].shape[1:]), first.element_spec[0].dtype.name
        else:
            first = np.asarray(first)
            shape, dtype = first.shape[1:], ("int32" if first.dtype.kind in "iu" else "float32")
        self._input = Input(shape, dtype=dtype)
        self._rebuild()

    @property
    def layers(self):
        return list(self._stack)
