"""The recurrent op: a whole sequence through one cell (``simple``, ``lstm`` or ``gru``), as Keras 3 computes it.

    outputs = rnn(x, kernel, recurrent_kernel, bias, states, mask, cell="lstm")   # (output, h, c)

Inputs: ``x`` ``(batch, time, features)``; the cell's weights in Keras' layout (``kernel`` ``(features, gates *
units)``, ``recurrent_kernel`` ``(units, gates * units)``, gates ``i f c o`` for an LSTM and ``z r h`` for a GRU;
``bias`` ``(gates * units,)``, or ``(2, 3 * units)`` for a GRU with ``reset_after``: input and recurrent biases),
present as ``attrs["use_bias"]`` says; then the initial states ``(batch, units)`` (``h``, and ``c`` for an LSTM)
where ``attrs["given_states"]``, else zeros; then, where ``attrs["masked"]``, a ``(batch, time)`` mask whose
nonzero entries mark the steps to take (bool, or the integer ids of an Embedding with ``mask_zero``).  Outputs:
the sequence of outputs ``(batch, time, units)`` (``return_sequences``) or the last one ``(batch, units)``, then
each final state.  A masked step keeps the states it received and outputs the previous output (zeros with
``zero_output_for_mask``).  With ``go_backwards`` the steps run from the last and the sequence comes out in that
order, or in the input's order with ``time_order`` (Bidirectional's merge).  Dropout masks are drawn once per sequence, as Keras draws them: one for the inputs, and per gate where
``recurrent_dropout`` is set (Keras' implementation 1).

Signatures per mesh axis: the batch split (``S(0)`` for the sequence, the states, the mask and every output, the
weights broadcast) and all broadcast.  Nothing else is exact without moving data at every step: the gates of one
unit lie ``units`` columns apart in Keras' kernel, so a split of its columns splits gates, not units; a kernel
that a layout rule stores split is gathered before the op (Boxing the planner charges).
"""
from .. import dtypes
from ..errors import DTypeError, LayerError, ShapeError, describe_shape
from ..framework.graph import apply
from ..framework.op_def import OpDef, Signature
from ..sbp import Split as S, broadcast as B

GATES = {"simple": 1, "lstm": 4, "gru": 3}
STATES = {"simple": 1, "lstm": 2, "gru": 1}
# Keras' activation names a cell computes, by the elementwise op that computes them
ACTIVATIONS = {"linear": "identity", "tanh": "tanh", "sigmoid": "sigmoid", "hard_sigmoid": "hard_sigmoid",
               "relu": "relu", "relu6": "relu6", "elu": "elu", "selu": "selu", "gelu": "gelu",
               "softplus": "softplus", "softsign": "softsign", "silu": "silu", "swish": "silu",
               "leaky_relu": "leaky_relu", "exponential": "exp"}


def parts(inputs, attrs):
    """``(x, kernel, recurrent_kernel, bias or None, [states], mask or None)`` of the op's inputs."""
    x, kernel, recurrent, *rest = inputs
    bias = rest.pop(0) if attrs["use_bias"] else None
    n = STATES[attrs["cell"]] if attrs["given_states"] else 0
    states, rest = list(rest[:n]), rest[n:]
    return x, kernel, recurrent, bias, states, (rest[0] if attrs["masked"] else None)


def _expect(blob, shape, what):
    if len(blob.shape) != len(shape) or any(a is not None and b is not None and a != b
                                            for a, b in zip(blob.shape, shape)):
        raise ShapeError(f"rnn: {what} expected shape {describe_shape(shape)}, received "
                         f"{describe_shape(blob.shape)}")


def bias_shape(cell, units, reset_after):
    return (2, 3 * units) if cell == "gru" and reset_after else (GATES[cell] * units,)


def _infer(inputs, attrs):
    cell, units = attrs["cell"], attrs["units"]
    if cell not in GATES:
        raise LayerError(f"rnn: cell expected one of {sorted(GATES)}, received {cell!r}")
    for what in ("activation", "recurrent_activation"):
        if attrs[what] not in ACTIVATIONS.values():
            raise LayerError(f"rnn: {what} expected one of {sorted(set(ACTIVATIONS.values()))}, received "
                             f"{attrs[what]!r}")
    for what in ("dropout", "recurrent_dropout"):
        if not 0.0 <= attrs[what] < 1.0:
            raise LayerError(f"rnn: {what} expected a rate in [0, 1), received {attrs[what]!r}")
    x, kernel, recurrent, bias, states, mask = parts(inputs, attrs)
    if x.ndim != 3 or not x.dtype.is_floating:
        raise ShapeError(f"rnn: expected a floating sequence (batch, time, features), received "
                         f"{describe_shape(x.shape)} {x.dtype}")
    batch, time, features = x.shape
    width = GATES[cell] * units
    _expect(kernel, (features, width), "kernel")
    _expect(recurrent, (units, width), "recurrent_kernel")
    if bias is not None:
        _expect(bias, bias_shape(cell, units, attrs["reset_after"]), "bias")
    for i, state in enumerate(states):
        _expect(state, (batch, units), f"initial state {i}")
    for blob in [kernel, recurrent] + ([bias] if bias is not None else []) + states:
        if blob.dtype != x.dtype:
            raise DTypeError(f"rnn: expected weights and states of the sequence's dtype {x.dtype}, received "
                             f"{blob.dtype}")
    if mask is not None:
        _expect(mask, (batch, time), "mask")
        if not (mask.dtype.is_integer or mask.dtype == dtypes.bool_):
            raise DTypeError(f"rnn: expected a bool or integer mask, received dtype {mask.dtype}")
    out = (batch, time, units) if attrs["return_sequences"] else (batch, units)
    return [(out, x.dtype)] + [((batch, units), x.dtype)] * STATES[cell]


def _signatures(inputs, attrs):
    x, kernel, recurrent, bias, states, mask = parts(inputs, attrs)
    weights = 3 if bias is not None else 2
    batch_split = (S(0),) + (B,) * weights + (S(0),) * (len(states) + (mask is not None))
    outputs = 1 + STATES[attrs["cell"]]
    return [Signature(batch_split, (S(0),) * outputs), Signature((B,) * len(inputs), (B,) * outputs)]


RNN = OpDef("rnn", _infer, _signatures)


def rnn(x, kernel, recurrent_kernel, bias=None, states=None, mask=None, *, cell, units, activation="tanh",
        recurrent_activation="sigmoid", reset_after=True, go_backwards=False, return_sequences=False,
        zero_output_for_mask=False, dropout=0.0, recurrent_dropout=0.0, training=None, seed=None, unroll=False,
        time_order=False, name=None):
    """The sequence ``x`` through ``cell``: a tuple ``(output, *final_states)``.  ``activation`` and
    ``recurrent_activation`` are keys of ``ACTIVATIONS``; ``training`` as for dropout (None: follow the step).
    ``unroll`` runs the same loop with its steps written out (the engine's scan, fully unrolled)."""
    attrs = {"cell": cell, "units": int(units), "activation": ACTIVATIONS.get(activation, activation),
             "recurrent_activation": ACTIVATIONS.get(recurrent_activation, recurrent_activation),
             "use_bias": bias is not None, "reset_after": bool(reset_after), "given_states": bool(states),
             "masked": mask is not None, "go_backwards": bool(go_backwards),
             "return_sequences": bool(return_sequences), "zero_output_for_mask": bool(zero_output_for_mask),
             "dropout": float(dropout), "recurrent_dropout": float(recurrent_dropout), "training": training,
             "seed": seed, "unroll": bool(unroll), "time_order": bool(time_order)}
    inputs = [x, kernel, recurrent_kernel] + ([bias] if bias is not None else []) + list(states or []) + (
        [mask] if mask is not None else [])
    out = apply(RNN, inputs, attrs, name)
    return out if isinstance(out, tuple) else (out,)
