"""Keras 3's products: ``matmul``, ``dot``, ``tensordot``, ``outer`` and ``einsum``, with numpy's meanings.

On Blobs each is one ``matmul`` op where numpy's matmul is a plain batched one, otherwise one ``einsum`` per pair
of operands whose equation the shapes write (so the SBP signatures come from the equation); batch dims of size 1
are broadcast first.  ``einsum`` takes numpy's forms: implicit output, ``...``, and more than two operands
(contracted left to right, each pair keeping the letters that later operands or the output need).
"""
import string

import numpy as np

from ..errors import ShapeError, describe_shape
from .einsum import einsum as einsum_op
from .matmul import matmul as matmul_op
from .dispatch import host_promoted, promoted, symbolic
from .keras_arrays import broadcast_to, reshape


def matmul(x1, x2):
    """Keras' ``ops.matmul(x1, x2)``: numpy's matmul (1-D operands, broadcast batch dims)."""
    if not symbolic(x1, x2):
        return np.matmul(*host_promoted(x1, x2))
    a, b = promoted(x1, x2)
    if a.ndim >= 2 and (b.ndim == 2 or a.shape[:-2] == b.shape[:-2] and a.ndim == b.ndim):
        return matmul_op(a, b)
    a_core, b_core = ("mk" if a.ndim >= 2 else "k"), ("kn" if b.ndim >= 2 else "k")
    a_batch, b_batch = a.shape[:a.ndim - len(a_core)], b.shape[:b.ndim - len(b_core)]
    a, b = _broadcast_batches(a, b, a_batch, b_batch, len(a_core), len(b_core))
    batch = string.ascii_uppercase[:max(len(a_batch), len(b_batch))]
    out = batch + a_core[:-1] + b_core[1:]
    equation = f"{batch[len(batch) - len(a_batch):]}{a_core},{batch[len(batch) - len(b_batch):]}{b_core}->{out}"
    return einsum_op(equation, a, b)


def _broadcast_batches(a, b, a_batch, b_batch, a_core, b_core):
    """``a`` and ``b`` with each batch dim of size 1 facing a larger one broadcast to it (sizes known)."""
    n = min(len(a_batch), len(b_batch))
    a_to, b_to = list(a.shape), list(b.shape)
    for k in range(1, n + 1):
        da, db = a_batch[-k], b_batch[-k]
        if da != db:
            if 1 not in (da, db):
                raise ShapeError(f"matmul expected batch dims that broadcast, received {describe_shape(a.shape)} "
                                 f"and {describe_shape(b.shape)}")
            a_to[len(a_batch) - k], b_to[len(b_batch) - k] = max(da, db), max(da, db)
    a = a if tuple(a_to) == a.shape else broadcast_to(a, a_to)
    b = b if tuple(b_to) == b.shape else broadcast_to(b, b_to)
    return a, b


def dot(x1, x2):
    """Keras' ``ops.dot(x1, x2)``: numpy's dot (the last axis of ``x1`` with the second-to-last of ``x2``)."""
    if not symbolic(x1, x2):
        return np.dot(*host_promoted(x1, x2))
    a, b = promoted(x1, x2)
    if a.ndim == 0 or b.ndim == 0:
        return a * b
    letters = iter(string.ascii_letters)
    a_free = "".join(next(letters) for _ in range(a.ndim - 1))
    k = next(letters)
    if b.ndim == 1:
        return einsum_op(f"{a_free}{k},{k}->{a_free}", a, b)
    b_free = "".join(next(letters) for _ in range(b.ndim - 2))
    j = next(letters)
    return einsum_op(f"{a_free}{k},{b_free}{k}{j}->{a_free}{b_free}{j}", a, b)


def tensordot(x1, x2, axes=2):
    """Keras' ``ops.tensordot``: ``axes`` an int (the last of ``x1`` with the first of ``x2``) or two lists."""
    if not symbolic(x1, x2):
        return np.tensordot(*host_promoted(x1, x2), axes)
    a, b = promoted(x1, x2)
    if isinstance(axes, int):
        a_axes, b_axes = list(range(a.ndim - axes, a.ndim)), list(range(axes))
    else:
        a_axes, b_axes = ([x] if isinstance(x, int) else list(x) for x in axes)
    a_axes, b_axes = [x % a.ndim for x in a_axes], [x % b.ndim for x in b_axes]
    letters = iter(string.ascii_letters)
    a_term = [next(letters) for _ in range(a.ndim)]
    b_term = [next(letters) for _ in range(b.ndim)]
    for i, j in zip(a_axes, b_axes):
        b_term[j] = a_term[i]
    out = [c for i, c in enumerate(a_term) if i not in a_axes] + [c for j, c in enumerate(b_term) if j not in b_axes]
    return einsum_op(f"{''.join(a_term)},{''.join(b_term)}->{''.join(out)}", a, b)


def outer(x1, x2):
    """Keras' ``ops.outer``: every product of the elements of ``x1`` and ``x2`` (both flattened)."""
    if not symbolic(x1, x2):
        return np.outer(*host_promoted(x1, x2))
    a, b = promoted(x1, x2)
    return einsum_op("i,j->ij", reshape(a, (-1,)), reshape(b, (-1,)))


def einsum(subscripts, *operands, **kwargs):
    """Keras' ``ops.einsum(subscripts, *operands)``: numpy's einsum (no repeated letter within one operand)."""
    if kwargs:
        raise ShapeError(f"flow.ops.einsum: unexpected keyword argument(s) {sorted(kwargs)}; expected the "
                         f"subscripts and the operands only")
    if not symbolic(*operands):
        return np.einsum(subscripts, *host_promoted(*operands))
    blobs = promoted(*operands)
    terms, out = _explicit(subscripts, [x.ndim for x in blobs])
    result, term = blobs[0], terms[0]
    for i in range(1, len(blobs)):
        later = set(out).union(*terms[i + 1:])
        keep = "".join(dict.fromkeys(c for c in term + terms[i] if c in later)) if i < len(blobs) - 1 else out
        result, term = einsum_op(f"{term},{terms[i]}->{keep}", result, blobs[i]), keep
    if len(blobs) == 1:
        result = einsum_op(f"{term}->{out}", result)
    return result


def _explicit(subscripts, ranks):
    """``subscripts`` with ``...`` written out in letters and the output made explicit (numpy's implicit output:
    the letters seen once, in alphabetical order, after the ellipsis dims)."""
    text = subscripts.replace(" ", "")
    left, arrow, out = text.partition("->")
    terms = left.split(",")
    if len(terms) != len(ranks):
        raise ShapeError(f"flow.ops.einsum {subscripts!r}: expected as many operands as terms ({len(terms)}), "
                         f"received {len(ranks)}")
    spare = [c for c in string.ascii_letters if c not in text]
    widest = max((rank - len(t.replace("...", "")) for t, rank in zip(terms, ranks) if "..." in t), default=0)
    ellipsis = "".join(spare[:widest])
    for i, (t, rank) in enumerate(zip(terms, ranks)):
        if "..." in t:
            n = rank - len(t.replace("...", ""))
            terms[i] = t.replace("...", ellipsis[widest - n:])
    if not arrow:
        counts = "".join(terms)
        out = ellipsis + "".join(sorted(c for c in set(counts) - set(ellipsis) if counts.count(c) == 1))
    else:
        out = out.replace("...", ellipsis)
    return terms, out
