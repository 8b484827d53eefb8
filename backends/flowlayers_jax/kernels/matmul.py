"""matmul (``flowlayers/ops/matmul.py``).

Its gradients are written as ``dot_general``s whose outputs come out in the operands' own layouts.  JAX's own rule
computes a kernel's gradient transposed and transposes it after; XLA folds that transpose into the dot, unless the
SPMD partitioner has put the gradient's all-reduce (a batch-split operand) between the two, and then every step
copies each kernel's gradient through a transpose (bench/RESULTS_jax_gradients.md).
"""
import functools

import jax
import jax.numpy as jnp
from jax import lax

from .varying import varying_alike


def matmul(node, a, b, ctx):
    ta, tb = node.attrs["transpose_a"], node.attrs["transpose_b"]
    if not jnp.issubdtype(a.dtype, jnp.inexact):      # integers (both operands have one dtype): no gradient
        return _product(ta, tb, a, b)
    return _matmul(ta, tb, *varying_alike(a, b))


def _product(ta, tb, a, b):
    a = jnp.swapaxes(a, -1, -2) if ta else a
    b = jnp.swapaxes(b, -1, -2) if tb else b
    return jnp.matmul(a, b)


@functools.partial(jax.custom_vjp, nondiff_argnums=(0, 1))
def _matmul(ta, tb, a, b):
    return _product(ta, tb, a, b)


def _forward(ta, tb, a, b):
    return _product(ta, tb, a, b), (a, b)


def _dot(x, y, x_axes, y_axes, batch=()):
    """x's axes ``x_axes`` contracted with y's ``y_axes``: (batch..., x's other axes..., y's other axes...)."""
    return lax.dot_general(x, y, ((x_axes, y_axes), (batch, batch)))


def _backward(ta, tb, saved, g):
    a, b = saved
    rank = g.ndim
    row, col = rank - 2, rank - 1                                   # of g
    a_row = rank - 1 if ta else rank - 2
    b_col = b.ndim - 2 if tb else b.ndim - 1
    if b.ndim == 2:     # a's leading dims are rows too: b's gradient sums over them
        batch, rows, a_rows = (), tuple(range(rank - 2)) + (row,), tuple(range(rank - 2)) + (a_row,)
    else:               # batched over the leading dims of both
        batch, rows, a_rows = tuple(range(rank - 2)), (row,), (a_row,)
    gb = _dot(g, a, rows, a_rows, batch) if tb else _dot(a, g, a_rows, rows, batch)
    if not ta:
        ga = _dot(g, b, (col,), (b_col,), batch)
    elif batch or rank == 2:
        ga = _dot(b, g, (b_col,), (col,), batch)
    else:               # (..., rows, k) has no dot_general order that puts k before the rows
        ga = jnp.swapaxes(_dot(g, b, (col,), (b_col,)), -1, -2)
    return ga, gb


_matmul.defvjp(_forward, _backward)

KERNELS = {"matmul": matmul}
