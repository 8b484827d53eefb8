"""einsum: ``flow.einsum("bqd,dhk->bqhk", x, kernel)``; its SBP signatures come from the equation.

Per mesh axis, any one index letter may be split: where it is kept in the output, every operand holding it is
split along it and so is the output (``S x B -> S`` for a batch or a column letter); where it is summed away,
every operand holding it is split along it and the output is a partial sum (``S(k) x S(k) -> P``, the Megatron
row-parallel product).  einsum is linear in each operand, so a partial-sum operand with the others whole gives a
partial sum.  One or two operands; explicit ``->``; no ellipsis or repeated letters (refused by name).
"""
import re

from ..errors import DTypeError, ShapeError, describe_shape
from ..framework.graph import apply
from ..framework.op_def import OpDef, Signature
from ..sbp import Split as S, broadcast as B, partial_sum as P


def parse(equation, n_operands):
    """``"ab,bc->ac"`` -> (["ab", "bc"], "ac"), or a ShapeError naming what is wrong with it."""
    what = f"einsum {equation!r}"
    if not isinstance(equation, str) or not re.fullmatch(r"[a-zA-Z]*(,[a-zA-Z]*)*->[a-zA-Z]*", equation.replace(
            " ", "")):
        raise ShapeError(f"{what}: expected 'subscripts,subscripts->subscripts' of letters (explicit '->', no "
                         f"ellipsis), received {equation!r}")
    left, out = equation.replace(" ", "").split("->")
    terms = left.split(",")
    if len(terms) != n_operands or n_operands not in (1, 2):
        raise ShapeError(f"{what}: expected one or two operands, as many as the equation's terms ({len(terms)}), "
                         f"received {n_operands}")
    for term in terms + [out]:
        if len(set(term)) != len(term):
            raise ShapeError(f"{what}: expected each letter at most once per term (no diagonals), received "
                             f"{term!r}")
    unknown = sorted(set(out) - set("".join(terms)))
    if unknown:
        raise ShapeError(f"{what}: expected the output's letters among the operands', received {unknown}")
    return terms, out


def _infer(inputs, attrs):
    equation = attrs["equation"]
    terms, out = parse(equation, len(inputs))
    sizes = {}
    for x, term in zip(inputs, terms):
        if x.ndim != len(term):
            raise ShapeError(f"einsum {equation!r}: operand {term!r} expected rank {len(term)}, received shape "
                             f"{describe_shape(x.shape)}")
        for letter, size in zip(term, x.shape):
            if size is not None and sizes.get(letter) not in (None, size):
                raise ShapeError(f"einsum {equation!r}: letter {letter!r} expected one size, received {sizes[letter]} "
                                 f"and {size} ({', '.join(describe_shape(i.shape) for i in inputs)})")
            sizes[letter] = size if size is not None else sizes.get(letter)
    if len({x.dtype for x in inputs}) != 1:
        raise DTypeError(f"einsum {equation!r}: expected operands of one dtype, received "
                         f"{', '.join(str(x.dtype) for x in inputs)}")
    return [(tuple(sizes[letter] for letter in out), inputs[0].dtype)]


def _signatures(inputs, attrs):
    terms, out = parse(attrs["equation"], len(inputs))
    n = len(inputs)
    sigs = [Signature((B,) * n, (B,))]
    for letter in dict.fromkeys("".join(terms)):
        split = tuple(S(term.index(letter)) if letter in term else B for term in terms)
        sigs.append(Signature(split, (S(out.index(letter)) if letter in out else P,)))
    for i in range(n):                          # linear in each operand
        sigs.append(Signature(tuple(P if j == i else B for j in range(n)), (P,)))
    return sigs


EINSUM = OpDef("einsum", _infer, _signatures)


def einsum(equation, *operands, name=None):
    """Keras' ``ops.einsum(subscripts, *operands)``: the sum of products the equation names."""
    return apply(EINSUM, list(operands), {"equation": equation}, name)
