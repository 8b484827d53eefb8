"""Bidirectional: a recurrent layer run forwards and a copy of it run backwards over one sequence, their outputs
merged, as Keras 3 builds, names and merges them.

The forward layer is a copy of ``layer`` named ``forward_<name>``, the backward one a copy with ``go_backwards=True``
named ``backward_<name>`` (or ``backward_layer`` as given); with ``return_sequences`` both output zeros at masked
steps, and the backward sequence is merged in the input's time order.  ``merge_mode``: ``"concat"`` (the default),
``"sum"``, ``"mul"``, ``"ave"`` or ``None`` (both outputs, a list).  ``initial_state``: the forward layer's states,
then the backward layer's; ``return_state`` adds both layers' final states the same way.  Weights: the forward
layer's, then the backward layer's, at their own paths (``forward_lstm/lstm_cell/kernel``).
"""
from ..errors import LayerError
from ..framework import graph
from ..ops import recurrent as rnn_ops
from ..ops.elementwise import add, multiply
from ..ops.shape import concat
from ..serialization import object_spec
from .base import Layer
from .recurrent import CLASSES, RNNLayer, call_inputs, call_parts

MERGE_MODES = ("concat", "sum", "mul", "ave", None)


class Bidirectional(Layer):
    """Keras' ``Bidirectional(layer, merge_mode="concat", weights=None, backward_layer=None)`` of a SimpleRNN, LSTM
    or GRU; ``weights`` is refused (give them with ``set_weights`` once the model is built)."""

    def __init__(self, layer, merge_mode="concat", weights=None, backward_layer=None, **kwargs):
        super().__init__(**kwargs)
        what = self.what = f"layer {self.name!r} (Bidirectional)"
        for arg, value in (("layer", layer), ("backward_layer", backward_layer)):
            if not isinstance(value, RNNLayer) and (arg == "layer" or value is not None):
                raise LayerError(f"{what}: {arg} expected a SimpleRNN, LSTM or GRU layer, received {value!r}")
        if merge_mode not in MERGE_MODES:
            raise LayerError(f"{what}: merge_mode expected one of {list(MERGE_MODES)}, received {merge_mode!r}")
        if weights is not None:
            raise LayerError(f"{what}: weights is not supported by flowlayers, received {len(weights)} arrays; "
                             f"expected None (call set_weights once the model is built)")
        self.forward_layer = copy(layer, name=f"forward_{layer.name.removeprefix('forward_')}")
        self.backward_layer = backward_layer if backward_layer is not None else copy(
            layer, name=f"backward_{layer.name.removeprefix('backward_')}", go_backwards=True)
        self._check_pair()
        for sub in self._pair:
            sub.zero_output_for_mask = sub.return_sequences
            sub.trainable = sub.trainable and self.trainable
        self.merge_mode = merge_mode
        self.return_sequences, self.return_state = layer.return_sequences, layer.return_state

    def _check_pair(self):
        forward, backward = self._pair
        if forward.go_backwards == backward.go_backwards:
            raise LayerError(f"{self.what}: expected forward and backward layers of different go_backwards, received "
                             f"go_backwards={forward.go_backwards} for both")
        for attr in ("return_sequences", "return_state"):
            if getattr(forward, attr) != getattr(backward, attr):
                raise LayerError(f"{self.what}: expected forward and backward layers of one {attr}, received "
                                 f"{getattr(forward, attr)} and {getattr(backward, attr)}")

    @property
    def _pair(self):
        return [self.forward_layer, self.backward_layer]

    @property
    def weights(self):
        return self.forward_layer.weights + self.backward_layer.weights

    @property
    def trainable(self):
        return self._trainable

    @trainable.setter
    def trainable(self, value):
        self._trainable = bool(value)
        for sub in self._pair:
            sub.trainable = value

    def build(self, input_shape):
        shape = input_shape[0] if isinstance(input_shape, list) else input_shape
        for sub in self._pair:
            if not sub.built:
                sub.build(shape)
                sub.built = True

    def __call__(self, sequences, initial_state=None, mask=None, training=None, **kwargs):
        """Keras' call: ``layer(sequences, initial_state=None, mask=None, training=None)``."""
        if kwargs:
            raise LayerError(f"{self.what}: unexpected keyword argument(s) {sorted(kwargs)}; expected "
                             f"initial_state, mask or training")
        return super().__call__(call_inputs(self, sequences, initial_state, mask), training=training)

    def call(self, inputs, training=None):
        x, states, mask = call_parts(inputs)
        forward, backward = self._pair
        n = rnn_ops.STATES[forward.cell]
        if states and len(states) != n + rnn_ops.STATES[backward.cell]:
            raise LayerError(f"{self.what}: initial_state expected {n + rnn_ops.STATES[backward.cell]} Blobs (the "
                             f"forward layer's states, then the backward layer's), received {len(states)}")
        with graph.layer_scope(forward):
            y = forward.run(x, states[:n], mask, training)
        with graph.layer_scope(backward):
            y_rev = backward.run(x, states[n:], mask, training, time_order=True)
        final = []
        if self.return_state:
            (y, *final), (y_rev, *final_rev) = y, y_rev
            final += final_rev
        merged = self._merge(y, y_rev)
        if not self.return_state:
            return merged
        return (merged if isinstance(merged, list) else [merged]) + final

    def _merge(self, y, y_rev):
        if self.merge_mode == "concat":
            return concat([y, y_rev], axis=-1)
        if self.merge_mode == "sum":
            return add(y, y_rev)
        if self.merge_mode == "mul":
            return multiply(y, y_rev)
        if self.merge_mode == "ave":
            return multiply(add(y, y_rev), 0.5)
        return [y, y_rev]

    def get_config(self):
        return {**super().get_config(), "merge_mode": self.merge_mode, "weights": None,
                "layer": object_spec(self.forward_layer, self.what),
                "backward_layer": object_spec(self.backward_layer, self.what)}

    @classmethod
    def from_config(cls, config):
        config = dict(config)
        config["layer"] = made(config["layer"])
        if config.get("backward_layer") is not None:
            config["backward_layer"] = made(config["backward_layer"])
        return cls(**config)


def copy(layer, **changes):
    """A new layer of ``layer``'s class and config, ``changes`` applied (Keras copies through the config too)."""
    return type(layer).from_config({**layer.get_config(), **changes})


def made(spec):
    """The recurrent layer a saved ``{"class_name", "module", "config"}`` describes."""
    cls = CLASSES.get(spec.get("class_name"))
    if cls is None or not str(spec.get("module", "")).startswith("flowlayers."):
        raise LayerError(f"Bidirectional.from_config: layer expected a saved SimpleRNN, LSTM or GRU of flowlayers, "
                         f"received class {spec.get('class_name')!r} of module {spec.get('module')!r}")
    return cls.from_config(dict(spec["config"]))
