"""rnn (``flowlayers/ops/recurrent.py``): a ``lax.scan`` over the time steps, each one Keras' cell.

The inputs' product with the kernel is taken for every step at once before the loop (one large matmul); the loop
carries the states and adds the recurrent product.  ``unroll`` unrolls the scan fully.
"""
import jax
import jax.numpy as jnp
from jax import lax

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


def dropout_masks(node, ctx, rate, name, count, shape):
    """Keras' dropout masks (kept: ``1 / (1 - rate)``, dropped: 0), drawn once per sequence; None when off."""
    if rate == 0.0 or not ctx.training(node.attrs["training"]):
        return None
    keep = ctx.random_uniform((count,) + tuple(shape), f"{node.name}/{name}", node.attrs.get("seed")) >= rate
    return jnp.where(keep, 1.0 / (1.0 - rate), 0.0)


def cell_step(attrs, recurrent, recurrent_bias, masks):
    """``step(states, projected input) -> (output, states)`` of the cell ``attrs["cell"]``."""
    act, gate = activation(attrs["activation"]), activation(attrs["recurrent_activation"])
    units, cell = attrs["units"], attrs["cell"]

    def simple(states, xw):
        h = act(xw + project(states[0], recurrent, masks))
        return h, (h,)

    def lstm(states, xw):
        h, c = states
        i, f, g, o = jnp.split(xw + project(h, recurrent, masks), 4, axis=-1)
        c = gate(f) * c + gate(i) * act(g)
        h = gate(o) * act(c)
        return h, (h, c)

    def gru(states, xw):
        (h,) = states
        x_z, x_r, x_h = jnp.split(xw, 3, axis=-1)
        if attrs["reset_after"]:
            inner = project(h, recurrent, masks)
            inner = inner + recurrent_bias if recurrent_bias is not None else inner
            r_z, r_r, r_h = jnp.split(inner, 3, axis=-1)
            z, r = gate(x_z + r_z), gate(x_r + r_r)
            candidate = act(x_h + r * r_h)
        else:
            r_z, r_r = jnp.split(project(h, recurrent[:, :2 * units], None if masks is None else masks[:2]), 2, -1)
            z, r = gate(x_z + r_z), gate(x_r + r_r)
            candidate = act(x_h + project(r * h, recurrent[:, 2 * units:], None if masks is None else masks[2:]))
        h = z * h + (1 - z) * candidate
        return h, (h,)

    return {"simple": simple, "lstm": lstm, "gru": gru}[cell]


def varying_as(carry, *arrays):
    """``carry`` made varying over every ``shard_map`` axis (mirrored view) that ``arrays`` vary over, as the carry
    the loop's body returns does: ``lax.scan`` wants it to come in as it goes out."""
    axes = set().union(*(jax.typeof(x).manual_axis_type.varying for x in arrays if x is not None))
    return tuple(lax.pcast(c, tuple(sorted(axes - jax.typeof(c).manual_axis_type.varying)), to="varying")
                 if axes - jax.typeof(c).manual_axis_type.varying else c for c in carry)


def rnn(node, x, kernel, recurrent, *rest, ctx):
    a = node.attrs
    bias, states, mask = parts(a, rest)
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
    body = loop_body(a, cell_step(a, recurrent, recurrent_bias, rec_masks), mask is not None)
    final, outputs = lax.scan(body, states, steps, unroll=xw.shape[0] if a["unroll"] else 1)
    if not a["return_sequences"]:
        return (outputs[-1],) + tuple(final)
    return (jnp.swapaxes(jnp.flip(outputs, 0) if a["go_backwards"] and a["time_order"] else outputs, 0, 1),) + \
        tuple(final)


def parts(attrs, rest):
    """(bias or None, given initial states (a tuple, maybe empty), mask or None) of the inputs after the kernels."""
    rest = list(rest)
    bias = rest.pop(0) if attrs["use_bias"] else None
    mask = rest.pop() if attrs["masked"] else None
    return bias, tuple(rest), mask


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
