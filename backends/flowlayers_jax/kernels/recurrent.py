"""rnn (``flowlayers/ops/recurrent.py``): a ``lax.scan`` over the time steps, each one Keras' cell.

The inputs' product with the kernel is taken for every step at once before the loop (one large matmul); the loop
carries the states and adds the recurrent product.  ``unroll`` unrolls the scan fully.
"""
from types import SimpleNamespace

import jax
import jax.numpy as jnp
from jax import lax

from flowlayers.backend_common import rnn_cell, rnn_inputs

from .elementwise import UNARY


def activation(name):
    if name == "leaky_relu":
        return lambda x: jnp.where(x > 0, x, 0.2 * x)
    return UNARY[name]


def project(x, weight, masks):
    """``x @ weight``; with dropout ``masks`` (count, batch, features), each gate's columns from ``x`` times that
    gate's mask (one mask: all of them)."""
    if masks is None:
        return x @ weight
    if masks.shape[0] == 1:
        return (x * masks[0]) @ weight
    width = weight.shape[1] // masks.shape[0]
    return jnp.concatenate([(x * m) @ weight[:, g * width:(g + 1) * width] for g, m in enumerate(masks)], -1)


def gates(z, n):
    """``z``'s last dim cut in ``n`` equal parts."""
    return jnp.split(z, n, axis=-1)


#: ``backend_common.rnn_cell``'s namespace: the cells' arithmetic written once, over these
CELL_MATH = SimpleNamespace(activation=activation, project=project, gates=gates)


def dropout_masks(node, ctx, rate, name, count, shape):
    """Keras' dropout masks (kept: ``1 / (1 - rate)``, dropped: 0), drawn once per sequence; None when off."""
    if rate == 0.0 or not ctx.training(node.attrs["training"]):
        return None
    keep = ctx.random_uniform((count,) + tuple(shape), f"{node.name}/{name}", node.attrs.get("seed")) >= rate
    return jnp.where(keep, 1.0 / (1.0 - rate), 0.0)


def varying_as(carry, *arrays):
    """``carry`` made varying over every ``shard_map`` axis (mirrored view) that ``arrays`` vary over, as the carry
    the loop's body returns does: ``lax.scan`` wants it to come in as it goes out."""
    axes = set().union(*(jax.typeof(x).manual_axis_type.varying for x in arrays if x is not None))
    return tuple(lax.pcast(c, tuple(sorted(axes - jax.typeof(c).manual_axis_type.varying)), to="varying")
                 if axes - jax.typeof(c).manual_axis_type.varying else c for c in carry)


def rnn(node, x, kernel, recurrent, *rest, ctx):
    a = node.attrs
    bias, states, mask = rnn_inputs(a, rest)
    input_bias, recurrent_bias = (bias[0], bias[1]) if bias is not None and bias.ndim == 2 else (bias, None)
    count = kernel.shape[1] // a["units"] if a["recurrent_dropout"] and a["cell"] != "simple" else 1
    in_masks = dropout_masks(node, ctx, a["dropout"], "dropout", count, (x.shape[0], x.shape[2]))
    rec_masks = dropout_masks(node, ctx, a["recurrent_dropout"], "recurrent_dropout", count,
                              (x.shape[0], a["units"]))
    xw = project(jnp.swapaxes(x, 0, 1), kernel, in_masks)          # (time, batch, gates * units)
    if input_bias is not None:
        xw = xw + input_bias
    if not states:
        states = (jnp.zeros((x.shape[0], a["units"]), x.dtype),) * (2 if a["cell"] == "lstm" else 1)
    states = varying_as(states, xw, recurrent, recurrent_bias, rec_masks)
    steps = (xw,) if mask is None else (xw, jnp.swapaxes(mask, 0, 1) != 0)
    if a["go_backwards"]:
        steps = tuple(jnp.flip(s, 0) for s in steps)
    body = loop_body(a, rnn_cell(CELL_MATH, a, recurrent, recurrent_bias, rec_masks), mask is not None)
    final, outputs = lax.scan(body, states, steps, unroll=xw.shape[0] if a["unroll"] else 1)
    if not a["return_sequences"]:
        return (outputs[-1],) + tuple(final)
    return (jnp.swapaxes(jnp.flip(outputs, 0) if a["go_backwards"] and a["time_order"] else outputs, 0, 1),) + \
        tuple(final)


def loop_body(attrs, step, masked):
    """``body(states, (projected input[, mask])) -> (states, output)`` for one step: a masked step keeps the states
    and gives the previous output (zeros with ``zero_output_for_mask``)."""
    def body(carry, inputs):
        output, new = step(carry, inputs[0])
        if not masked:
            return new, output
        taken = inputs[1][:, None]
        kept = jnp.zeros_like(output) if attrs["zero_output_for_mask"] else carry[0]
        return tuple(jnp.where(taken, n, s) for n, s in zip(new, carry)), jnp.where(taken, output, kept)
    return body


KERNELS = {"rnn": rnn}
