"""einsum (``flowlayers/ops/einsum.py``: one or two operands, explicit ``->``, no ellipsis or repeated letters).

A two-operand einsum's gradients are one ``dot_general`` each, its operands ordered so that the result comes out in
the gradient's own layout where an order does: as for ``matmul`` (``matmul.py``), a transpose left after a
batch-split kernel gradient's all-reduce costs a transposing copy per step.
"""
import functools

import jax
import jax.numpy as jnp
from jax import lax

from .varying import varying_alike


def einsum(node, *operands, ctx):
    equation = node.attrs["equation"]
    if len(operands) != 2 or not jnp.issubdtype(operands[0].dtype, jnp.inexact):
        return jnp.einsum(equation, *operands)
    return _einsum(equation.replace(" ", ""), *varying_alike(*operands))


@functools.partial(jax.custom_vjp, nondiff_argnums=(0,))
def _einsum(equation, a, b):
    return jnp.einsum(equation, a, b)


def _forward(equation, a, b):
    return jnp.einsum(equation, a, b), (a, b)


def _backward(equation, saved, g):
    a, b = saved
    left, to = equation.split("->")
    ta, tb = left.split(",")
    sizes = {**dict(zip(ta, a.shape)), **dict(zip(tb, b.shape))}
    return _gradient(ta, g, to, b, tb, sizes).astype(a.dtype), _gradient(tb, g, to, a, ta, sizes).astype(b.dtype)


def _gradient(target, g, g_terms, other, o_terms, sizes):
    """The gradient of the operand written ``target``: ``g`` (written ``g_terms``) contracted with ``other``."""
    alone = [i for i, c in enumerate(o_terms) if c not in target and c not in g_terms]
    if alone:       # summed within ``other`` alone in the forward einsum
        other = jnp.sum(other, axis=tuple(alone))
        o_terms = "".join(c for c in o_terms if c in target or c in g_terms)
    batch = [c for c in target if c in g_terms and c in o_terms]
    summed = [c for c in g_terms if c in o_terms and c not in target]
    g_free = [c for c in g_terms if c in target and c not in o_terms]
    o_free = [c for c in o_terms if c in target and c not in g_terms]
    want = [c for c in target if c in g_terms or c in o_terms]

    def dot(x, x_terms, y, y_terms):
        return lax.dot_general(x, y, (([x_terms.index(c) for c in summed], [y_terms.index(c) for c in summed]),
                                      ([x_terms.index(c) for c in batch], [y_terms.index(c) for c in batch])))

    if batch + o_free + g_free == want:
        out, got = dot(other, o_terms, g, g_terms), batch + o_free + g_free
    else:           # g first; a transpose after where neither order gives the target's
        out, got = dot(g, g_terms, other, o_terms), batch + g_free + o_free
    if got != want:
        out = jnp.transpose(out, [got.index(c) for c in want])
    if len(want) < len(target):     # letters of the target alone: its gradient is the same along them
        out = lax.broadcast_in_dim(out, tuple(sizes[c] for c in target), [target.index(c) for c in want])
    return out


_einsum.defvjp(_forward, _backward)

KERNELS = {"einsum": einsum}
