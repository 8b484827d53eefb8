"""Recurrent layers: SimpleRNN, LSTM, GRU, with Keras 3's arguments, weights and results.

    x = flow.Input((20,), dtype="int32")
    h = flow.layers.Embedding(1000, 32, mask_zero=True)(x)       # id 0 pads: those steps are skipped
    y = flow.layers.LSTM(64)(h)                                  # (batch, 64): the last output

Each is one ``rnn`` op (``flowlayers/ops/recurrent.py``), a scan over the time steps on the engine.  Weights as
Keras names and lays them out: ``<name>/lstm_cell/kernel`` ``(features, 4 * units)`` (gates ``i f c o``),
``recurrent_kernel`` ``(units, 4 * units)``, ``bias`` ``(4 * units,)``; a GRU's gates ``z r h`` and, with
``reset_after`` (the default), a bias ``(2, 3 * units)``: ``set_weights`` takes a Keras layer's weights as they are.

Called as Keras calls them: ``layer(x, initial_state=[h, c], mask=m, training=...)``, or on a list ``[x, h, c]``.
A mask (bool or integer, nonzero = a step to take) is given, or comes from an ``Embedding(mask_zero=True)`` that
made ``x``.  ``stateful=True``, constraints, ``activity_regularizer`` and ``use_cudnn=True`` are refused by name.
"""
import numpy as np

from .. import activations, initializers, regularizers
from ..errors import LayerError, ShapeError, describe_shape
from ..framework import naming
from ..framework.blob import Blob
from ..ops import recurrent as rnn_ops
from .base import Layer


class RNNLayer(Layer):
    """What SimpleRNN, LSTM and GRU share: arguments, weights, the call.  ``cell`` names the op's cell,
    ``cell_name`` Keras' cell (its weights' paths), ``base_name`` Keras' automatic layer name."""
    cell = cell_name = base_name = None

    def __init__(self, name=None, **kwargs):
        super().__init__(name=name or naming.unique_name(self.base_name), **kwargs)

    def setup(self, units, activation, recurrent_activation, use_bias, initializers_, regularizers_, refused,
              dropout, recurrent_dropout, seed, return_sequences, return_state, go_backwards, unroll,
              zero_output_for_mask):
        """Check and keep the arguments every recurrent layer takes (``initializers_``: kernel, recurrent, bias;
        ``regularizers_``: kernel, recurrent, bias; ``refused``: {argument: value} that must be None/False)."""
        what = self.what = f"layer {self.name!r} ({type(self).__name__})"
        if isinstance(units, bool) or not isinstance(units, int) or units <= 0:
            raise LayerError(f"{what}: units expected a positive int, received {units!r}")
        for arg, value in refused.items():
            if value not in (None, False):
                raise LayerError(f"{what}: {arg} is not supported by flowlayers, received {value!r}; expected "
                                 f"{'False' if arg == 'stateful' else 'None'}"
                                 + ("; pass the last states back as initial_state instead" if arg == "stateful"
                                    else ""))
        for arg, rate in (("dropout", dropout), ("recurrent_dropout", recurrent_dropout)):
            if isinstance(rate, bool) or not isinstance(rate, (int, float)) or not 0 <= rate < 1:
                raise LayerError(f"{what}: {arg} expected a number in [0, 1), received {rate!r}")
        for arg, flag in (("use_bias", use_bias), ("return_sequences", return_sequences),
                          ("return_state", return_state), ("go_backwards", go_backwards), ("unroll", unroll),
                          ("zero_output_for_mask", zero_output_for_mask)):
            if not isinstance(flag, bool):
                raise LayerError(f"{what}: {arg} expected True or False, received {flag!r}")
        self.units, self.use_bias, self.seed = units, use_bias, seed
        self.activation = self._activation(activation, "activation")
        self.recurrent_activation = self._activation(recurrent_activation, "recurrent_activation")
        self.kernel_initializer, self.recurrent_initializer, self.bias_initializer = (
            initializers.get(i, f"{what}: {n}_initializer")
            for i, n in zip(initializers_, ("kernel", "recurrent", "bias")))
        self.kernel_regularizer, self.recurrent_regularizer, self.bias_regularizer = (
            regularizers.get(r, f"{what}: {n}_regularizer")
            for r, n in zip(regularizers_, ("kernel", "recurrent", "bias")))
        self.dropout, self.recurrent_dropout = float(dropout), float(recurrent_dropout)
        self.return_sequences, self.return_state, self.go_backwards = return_sequences, return_state, go_backwards
        self.unroll, self.zero_output_for_mask, self.stateful = unroll, zero_output_for_mask, False

    def _activation(self, identifier, arg):
        fn = activations.get(identifier, f"{self.what}: {arg}")
        name = activations.name_of(fn)
        if name not in rnn_ops.ACTIVATIONS:
            raise LayerError(f"{self.what}: {arg} expected one of {sorted(rnn_ops.ACTIVATIONS)} (the cell computes "
                             f"it inside the engine's loop), received {identifier!r}")
        return fn

    # Weights ------------------------------------------------------------
    def build(self, input_shape):
        shape = input_shape[0] if isinstance(input_shape, list) else input_shape
        width = rnn_ops.GATES[self.cell] * self.units
        self.kernel = self.add_weight(f"{self.cell_name}/kernel", (shape[-1], width), self.kernel_initializer,
                                      regularizer=self.kernel_regularizer)
        self.recurrent_kernel = self.add_weight(f"{self.cell_name}/recurrent_kernel", (self.units, width),
                                                self.recurrent_initializer, regularizer=self.recurrent_regularizer)
        self.bias = self.add_weight(f"{self.cell_name}/bias", rnn_ops.bias_shape(self.cell, self.units,
                                                                                 self.reset_after),
                                    self.initial_bias(), regularizer=self.bias_regularizer) if self.use_bias else None
        self.fix_feature_dims(last=shape[-1])

    def initial_bias(self):
        return self.bias_initializer

    reset_after = False

    # Calling ------------------------------------------------------------
    def __call__(self, sequences, initial_state=None, mask=None, training=None, **kwargs):
        """Keras' call: ``layer(sequences, initial_state=None, mask=None, training=None)``; ``sequences`` may be a
        list ``[x, *initial_states]`` (and a last bool or integer mask), as a saved model calls it again."""
        if kwargs:
            raise LayerError(f"{self.what}: unexpected keyword argument(s) {sorted(kwargs)}; expected "
                             f"initial_state, mask or training")
        return super().__call__(call_inputs(self, sequences, initial_state, mask), training=training)

    def _parts(self, inputs):
        x, states, mask = call_parts(inputs)
        n = rnn_ops.STATES[self.cell]
        if states and len(states) != n:
            raise LayerError(f"{self.what}: initial_state expected {n} Blob(s) of shape (batch, {self.units}), "
                             f"received {len(states)}")
        return x, states, mask

    def call(self, inputs, training=None):
        return self.run(*self._parts(inputs), training=training)

    def run(self, x, states, mask, training=None, time_order=False):
        """The layer's outputs for sequence ``x`` from initial ``states`` (a list, maybe empty) under ``mask`` (None:
        an ``Embedding(mask_zero=True)``'s that made ``x``, if any); ``time_order``: a backward sequence returned
        in the input's order (Bidirectional's merge)."""
        if self.unroll and x.shape[1] is None:
            raise LayerError(f"{self.what}: unroll=True expected a known number of time steps, received a sequence "
                             f"of shape {describe_shape(x.shape)}; give the Input its length")
        if mask is None:
            mask = embedding_mask(x)
        outputs = rnn_ops.rnn(
            x, self.read(self.kernel), self.read(self.recurrent_kernel),
            self.read(self.bias) if self.bias is not None else None, states, mask, cell=self.cell, units=self.units,
            activation=activations.name_of(self.activation),
            recurrent_activation=activations.name_of(self.recurrent_activation), reset_after=self.reset_after,
            go_backwards=self.go_backwards, return_sequences=self.return_sequences,
            zero_output_for_mask=self.zero_output_for_mask, dropout=self.dropout,
            recurrent_dropout=self.recurrent_dropout, training=training, seed=self.seed, unroll=self.unroll,
            time_order=time_order)
        return list(outputs) if self.return_state else outputs[0]

    def get_config(self):
        return {**super().get_config(), "units": self.units, "activation": activations.name_of(self.activation),
                "use_bias": self.use_bias,
                "kernel_initializer": initializers.serialize(self.kernel_initializer),
                "recurrent_initializer": initializers.serialize(self.recurrent_initializer),
                "bias_initializer": initializers.serialize(self.bias_initializer),
                "kernel_regularizer": regularizers.serialize(self.kernel_regularizer),
                "recurrent_regularizer": regularizers.serialize(self.recurrent_regularizer),
                "bias_regularizer": regularizers.serialize(self.bias_regularizer),
                "activity_regularizer": None, "kernel_constraint": None, "recurrent_constraint": None,
                "bias_constraint": None, "dropout": self.dropout, "recurrent_dropout": self.recurrent_dropout,
                "seed": self.seed, "return_sequences": self.return_sequences, "return_state": self.return_state,
                "go_backwards": self.go_backwards, "stateful": False, "unroll": self.unroll,
                "zero_output_for_mask": self.zero_output_for_mask}


def call_inputs(layer, sequences, initial_state, mask):
    """Keras' ``(sequences, initial_state, mask)`` of a recurrent call as one list ``[x, *states, mask]`` (or ``x``
    alone), what the call records; ``sequences`` may be that list already (a saved model calls it so)."""
    extra = []
    if isinstance(sequences, (list, tuple)):
        sequences, *extra = sequences
    if initial_state is not None:
        extra += list(initial_state) if isinstance(initial_state, (list, tuple)) else [initial_state]
    if mask is not None:
        if isinstance(mask, Blob) and mask.dtype.is_floating:
            raise LayerError(f"{layer.what}: mask expected a bool or integer Blob (nonzero: a step to take), "
                             f"received dtype {mask.dtype}; cast it with flow.cast(mask, flow.bool)")
        extra.append(mask)
    if not isinstance(sequences, Blob) or sequences.ndim != 3:
        raise ShapeError(f"{layer.what}: expected a sequence (batch, time, features), received "
                         f"{describe_shape(sequences.shape) if isinstance(sequences, Blob) else sequences!r}")
    return [sequences] + extra if extra else sequences


def call_parts(inputs):
    """(sequence, initial states, mask) of ``call_inputs``' list: the floating Blobs after the sequence are the
    states, a last bool or integer one the mask."""
    if not isinstance(inputs, list):
        return inputs, [], None
    x, *rest = inputs
    mask = rest.pop() if rest and not rest[-1].dtype.is_floating else None
    return x, rest, mask


def embedding_mask(x):
    """The ids of an ``Embedding(mask_zero=True)`` whose output ``x`` is (nonzero: a step to take), else None."""
    made = x.call[0] if x.call is not None else None
    if made is None or not getattr(made.owner, "mask_zero", False):
        return None
    ids = made.inputs[0] if isinstance(made.inputs, (list, tuple)) else made.inputs
    return ids if ids.ndim == 2 else None


def check_cudnn(layer, use_cudnn):
    if use_cudnn not in ("auto", True, False):
        raise LayerError(f"{layer.what}: use_cudnn expected 'auto', True or False, received {use_cudnn!r}")
    if use_cudnn is True:
        raise LayerError(f"{layer.what}: use_cudnn=True is not supported: flowlayers runs the engine's scan, not "
                         f"cuDNN's kernel; expected 'auto' or False")
    return use_cudnn


class SimpleRNN(RNNLayer):
    """Keras' ``SimpleRNN``: ``output = activation(x @ kernel + h @ recurrent_kernel + bias)`` at each step."""

    cell, cell_name, base_name = "simple", "simple_rnn_cell", "simple_rnn"

    def __init__(self, units, activation="tanh", use_bias=True, kernel_initializer="glorot_uniform",
                 recurrent_initializer="orthogonal", bias_initializer="zeros", kernel_regularizer=None,
                 recurrent_regularizer=None, bias_regularizer=None, activity_regularizer=None, kernel_constraint=None,
                 recurrent_constraint=None, bias_constraint=None, dropout=0.0, recurrent_dropout=0.0,
                 return_sequences=False, return_state=False, go_backwards=False, stateful=False, unroll=False,
                 seed=None, zero_output_for_mask=False, **kwargs):
        super().__init__(**kwargs)
        self.setup(units, activation, "sigmoid", use_bias,
                   (kernel_initializer, recurrent_initializer, bias_initializer),
                   (kernel_regularizer, recurrent_regularizer, bias_regularizer),
                   {"activity_regularizer": activity_regularizer, "kernel_constraint": kernel_constraint,
                    "recurrent_constraint": recurrent_constraint, "bias_constraint": bias_constraint,
                    "stateful": stateful},
                   dropout, recurrent_dropout, seed, return_sequences, return_state, go_backwards, unroll,
                   zero_output_for_mask)


class LSTM(RNNLayer):
    """Keras' ``LSTM``: gates ``i f c o``; ``unit_forget_bias`` starts the forget gate's bias at 1."""

    cell, cell_name, base_name = "lstm", "lstm_cell", "lstm"

    def __init__(self, units, activation="tanh", recurrent_activation="sigmoid", use_bias=True,
                 kernel_initializer="glorot_uniform", recurrent_initializer="orthogonal", bias_initializer="zeros",
                 unit_forget_bias=True, kernel_regularizer=None, recurrent_regularizer=None, bias_regularizer=None,
                 activity_regularizer=None, kernel_constraint=None, recurrent_constraint=None, bias_constraint=None,
                 dropout=0.0, recurrent_dropout=0.0, seed=None, return_sequences=False, return_state=False,
                 go_backwards=False, stateful=False, unroll=False, use_cudnn="auto", zero_output_for_mask=False,
                 **kwargs):
        super().__init__(**kwargs)
        self.setup(units, activation, recurrent_activation, use_bias,
                   (kernel_initializer, recurrent_initializer, bias_initializer),
                   (kernel_regularizer, recurrent_regularizer, bias_regularizer),
                   {"activity_regularizer": activity_regularizer, "kernel_constraint": kernel_constraint,
                    "recurrent_constraint": recurrent_constraint, "bias_constraint": bias_constraint,
                    "stateful": stateful},
                   dropout, recurrent_dropout, seed, return_sequences, return_state, go_backwards, unroll,
                   zero_output_for_mask)
        self.use_cudnn = check_cudnn(self, use_cudnn)
        if not isinstance(unit_forget_bias, bool):
            raise LayerError(f"{self.what}: unit_forget_bias expected True or False, received {unit_forget_bias!r}")
        if unit_forget_bias and use_bias and not isinstance(self.bias_initializer, initializers.Constant):
            raise LayerError(f"{self.what}: unit_forget_bias=True expected a constant bias_initializer (Keras: it "
                             f"forces 'zeros'), received {self.bias_initializer!r}; pass unit_forget_bias=False")
        self.unit_forget_bias = unit_forget_bias

    def initial_bias(self):
        """Keras' forget gate bias: the bias initializer's value, and 1 on the forget gate's units."""
        return ForgetBias(self.bias_initializer.value, self.units) if self.unit_forget_bias else \
            self.bias_initializer

    def get_config(self):
        return {**super().get_config(), "recurrent_activation": activations.name_of(self.recurrent_activation),
                "unit_forget_bias": self.unit_forget_bias, "use_cudnn": self.use_cudnn}


class ForgetBias(initializers.Initializer):
    """``(4 * units,)``: ``value`` on the input, cell and output gates, 1 on the forget gate (made on the host)."""

    def __init__(self, value, units):
        self.fill, self.units = float(value), units

    def sampler(self, shape):
        return "constant", {"value": self.fill}     # stands for it in a VariableSpec; ``host_value`` is always given

    def host_value(self, shape, seed):
        bias = np.full(shape, self.fill)
        bias[self.units:2 * self.units] = 1.0
        return bias


class GRU(RNNLayer):
    """Keras' ``GRU``: gates ``z r h``; ``reset_after`` (the default) applies the reset gate after the
    recurrent product, with a recurrent bias of its own."""

    cell, cell_name, base_name = "gru", "gru_cell", "gru"

    def __init__(self, units, activation="tanh", recurrent_activation="sigmoid", use_bias=True,
                 kernel_initializer="glorot_uniform", recurrent_initializer="orthogonal", bias_initializer="zeros",
                 kernel_regularizer=None, recurrent_regularizer=None, bias_regularizer=None,
                 activity_regularizer=None, kernel_constraint=None, recurrent_constraint=None, bias_constraint=None,
                 dropout=0.0, recurrent_dropout=0.0, seed=None, return_sequences=False, return_state=False,
                 go_backwards=False, stateful=False, unroll=False, reset_after=True, use_cudnn="auto",
                 zero_output_for_mask=False, **kwargs):
        super().__init__(**kwargs)
        self.setup(units, activation, recurrent_activation, use_bias,
                   (kernel_initializer, recurrent_initializer, bias_initializer),
                   (kernel_regularizer, recurrent_regularizer, bias_regularizer),
                   {"activity_regularizer": activity_regularizer, "kernel_constraint": kernel_constraint,
                    "recurrent_constraint": recurrent_constraint, "bias_constraint": bias_constraint,
                    "stateful": stateful},
                   dropout, recurrent_dropout, seed, return_sequences, return_state, go_backwards, unroll,
                   zero_output_for_mask)
        self.use_cudnn = check_cudnn(self, use_cudnn)
        if not isinstance(reset_after, bool):
            raise LayerError(f"{self.what}: reset_after expected True or False, received {reset_after!r}")
        self.reset_after = reset_after

    def get_config(self):
        return {**super().get_config(), "recurrent_activation": activations.name_of(self.recurrent_activation),
                "reset_after": self.reset_after, "use_cudnn": self.use_cudnn}


CLASSES = {cls.__name__: cls for cls in (SimpleRNN, LSTM, GRU)}
