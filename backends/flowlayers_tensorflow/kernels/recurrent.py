"""rnn (``flowlayers/ops/recurrent.py``): ``tf.scan`` over the time steps, each one Keras' cell.

The inputs' product with the kernel is taken for every step at once before the loop (one large matmul); the loop
carries the states and adds the recurrent product.  ``unroll`` writes the steps out instead of looping, and so
does the consistent view: DTensor has no layout rule for the TensorList ops that ``tf.scan`` and the gradient of
``tf.while_loop`` stack tensors with.  The zero
initial states are made from the sequence (not as constants), so that DTensor lays them out as it does the batch.

Written out, no step is taken with an index (``xw[t]``, a StridedSlice that drops dim 0): DTensor (TF 2.21) lays
the result of such a slice out with the input's first specs, not with the dropped dim's spec removed, so the
(time, batch, units) projection laid out (-, data, -) gave steps laid out (-, data): units split over ``data``,
which an odd width cannot be ("'tf.DTensorLayout' op requires dimension 1 to be divisible", SimpleRNN(3) and
GRU(3) on 2 devices), and an even one is, at a relayout per step; so did the dropout masks ``masks[g]`` and
the last output ``sequence[-1]`` (LSTM(3) without return_sequences).  ``tf.unstack`` (and ``tf.gather``) lay it
out right (bench/probe_dtensor_rnn_odd_units.py); the last output is the last step's.
"""
from types import SimpleNamespace

import tensorflow as tf

from flowlayers.backend_common import rnn_cell, rnn_inputs
from flowlayers.errors import EngineError

from .elementwise import UNARY


def activation(name):
    if name == "leaky_relu":
        return lambda x: tf.nn.leaky_relu(x, alpha=0.2)
    return UNARY[name]


def project(x, weight, masks):
    """``x @ weight``; with dropout ``masks`` (count, batch, features), each gate's columns from ``x`` times that
    gate's mask (one mask: all of them).  The masks are taken by ``tf.unstack``, not ``masks[g]`` (see the module's
    docstring: a (count, batch, width) mask laid out (-, data, -) gave (-, data) masks)."""
    if masks is None:
        return _matmul(x, weight)
    masks = tf.unstack(masks)
    if len(masks) == 1:
        return _matmul(x * masks[0], weight)
    width = weight.shape[1] // len(masks)
    return tf.concat([_matmul(x * m, weight[:, g * width:(g + 1) * width]) for g, m in enumerate(masks)], -1)


def _matmul(x, weight):
    return tf.matmul(x, weight) if x.shape.rank == 2 else tf.einsum("tbf,fu->tbu", x, weight)


def dropout_masks(node, ctx, rate, name, count, batch, width):
    """Keras' dropout masks (kept: ``1 / (1 - rate)``, dropped: 0), drawn once per sequence; None when off."""
    if rate == 0.0 or not ctx.training(node.attrs["training"]):
        return None
    uniform = ctx.random_uniform(tf.stack([count, batch, width]), f"{node.name}/{name}", node.attrs.get("seed"))
    keep = tf.cast(uniform >= rate, uniform.dtype)
    return tf.reshape(keep / (1.0 - rate), [count, -1, width])


def gates(z, n):
    """``z``'s last dim cut in ``n`` equal parts, by slices: DTensor refuses a tf.split of a tensor split over some
    dim, even another one."""
    width = z.shape[-1] // n
    return [z[..., g * width:(g + 1) * width] for g in range(n)]


#: ``backend_common.rnn_cell``'s namespace: the cells' arithmetic written once, over these
CELL_MATH = SimpleNamespace(activation=activation, project=project, gates=gates)


def rnn(node, x, kernel, recurrent, *rest, ctx):
    a = node.attrs
    bias, states, mask = rnn_inputs(a, rest)
    input_bias, recurrent_bias = (bias[0], bias[1]) if bias is not None and bias.shape.rank == 2 else (bias, None)
    count = kernel.shape[1] // a["units"] if a["recurrent_dropout"] and a["cell"] != "simple" else 1
    batch = tf.shape(x)[0]
    in_masks = dropout_masks(node, ctx, a["dropout"], "dropout", count, batch, x.shape[2])
    rec_masks = dropout_masks(node, ctx, a["recurrent_dropout"], "recurrent_dropout", count, batch, a["units"])
    xw = project(tf.transpose(x, [1, 0, 2]), kernel, in_masks)          # (time, batch, gates * units)
    if input_bias is not None:
        xw = xw + input_bias
    if not states:      # tf.gather, not xw[0]: see the module's docstring
        states = (tf.zeros_like(tf.gather(xw, 0)[:, :a["units"]]),) * (2 if a["cell"] == "lstm" else 1)
    steps = (xw,) if mask is None else (xw, tf.transpose(tf.not_equal(mask, tf.zeros_like(mask)), [1, 0]))
    body = loop_body(a, rnn_cell(CELL_MATH, a, recurrent, recurrent_bias, rec_masks), mask is not None,
                     ctx.input_sbp(node, 0), ctx)
    init = states + (tf.zeros_like(states[0]),)
    backwards, in_time = a["go_backwards"], a["go_backwards"] and a["time_order"] and a["return_sequences"]
    if a["unroll"] or ctx.input_sbp(node, 0) is not None:
        final, outputs = written_out(node, body, init, steps, backwards)
        if not a["return_sequences"]:
            return (outputs[-1],) + final
        sequence = tf.stack(outputs[::-1] if in_time else outputs)
    else:
        stacked = tf.scan(body, tuple(tf.reverse(s, [0]) for s in steps) if backwards else steps, initializer=init)
        final, sequence = tuple(s[-1] for s in stacked[:-1]), tf.reverse(stacked[-1], [0]) if in_time else \
            stacked[-1]
    output = tf.transpose(sequence, [1, 0, 2]) if a["return_sequences"] else sequence[-1]
    return (output,) + final


def loop_body(attrs, step, masked, nd, ctx):
    """``body((*states, output), (projected input[, mask])) -> (*states, output)`` for one step: a masked step
    keeps the states and gives the previous output (zeros with ``zero_output_for_mask``).  ``nd`` (the consistent
    view): the batch's nd-SBP, to which each step's states are pinned (DTensor failed to lay out a square
    recurrent kernel's gradient otherwise)."""
    def body(carry, inputs):
        carry = carry[:-1]
        output, new = step(carry, inputs[0])
        if nd is not None:
            output, new = ctx.lay_out(output, nd), tuple(ctx.lay_out(n, nd) for n in new)
        if not masked:
            return new + (output,)
        taken = inputs[1][:, None]
        kept = tf.zeros_like(output) if attrs["zero_output_for_mask"] else carry[0]
        return tuple(tf.where(taken, n, s) for n, s in zip(new, carry)) + (tf.where(taken, output, kept),)
    return body


def written_out(node, body, init, steps, backwards):
    """The loop with its steps written out: (final states, the outputs in the order the steps ran).  Each step's
    inputs are ``tf.unstack``'s, not ``s[t]`` (see the module's docstring)."""
    time = steps[0].shape[0]
    if time is None:
        raise EngineError(f"layer {node.layer.name if node.layer else node.name!r}: the tensorflow backend writes "
                          f"the steps out in the consistent view (DTensor lays out no loop that stacks tensors, as "
                          f"tf.scan and the gradient of tf.while_loop do), so it expected a known number of time "
                          f"steps, received a sequence of shape {tuple(node.inputs[0].shape)}; give the Input its "
                          f"length, or use the mirrored view")
    carry, outputs, per_step = init, [], [tf.unstack(s) for s in steps]
    for t in reversed(range(time)) if backwards else range(time):
        carry = body(carry, tuple(s[t] for s in per_step))
        outputs.append(carry[-1])
    return carry[:-1], outputs


KERNELS = {"rnn": rnn}
