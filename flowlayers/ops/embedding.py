"""Embedding lookup: rows of a table gathered by integer ids.

Signatures per mesh axis: ids split along any dim (``B x S(k) -> S(k)``), the table's columns split
(``S(1) x B -> S(-1)``), or its rows split (``S(0) x B -> P``, the vocabulary-parallel embedding of Megatron:
each device looks up the ids among the rows it holds, zeros for the others, and the sum is the lookup).  A
backend realises the last as it can; TensorFlow's DTensor refuses a gather from a row-split variable, so there it
is a product with the one-hot ids, whose block per device is shaped like that device's logits in a
vocabulary-parallel head: ``ids.shape + (rows / n,)``; the planner weighs it against gathering the table (it
wins where a device's ids number fewer than the table's columns, on two devices).
"""
from ..errors import DTypeError, ShapeError, describe_shape
from ..framework.graph import apply
from ..framework.op_def import OpDef, Signature
from ..parallel import boxing
from ..sbp import Split as S, broadcast as B, partial_sum as P


def _infer(inputs, attrs):
    table, ids = inputs
    if not ids.dtype.is_integer:
        raise DTypeError(f"expected integer ids, received dtype {ids.dtype}")
    if table.ndim != 2:
        raise ShapeError(f"expected a 2-D table (rows, dim), received {describe_shape(table.shape)}")
    return [(ids.shape + table.shape[1:], table.dtype)]


def _signatures(inputs, attrs):
    table, ids = inputs
    one_hot = boxing.nbytes(ids.shape + table.shape[:1], table.dtype)
    return ([Signature((B, S(k)), (S(k),)) for k in range(ids.ndim)]
            + [Signature((S(1), B), (S(ids.ndim),)), Signature((S(0), B), (P,), temporary_bytes=one_hot),
               Signature((B, B), (B,))])


GATHER = OpDef("gather", _infer, _signatures)


def gather(table, ids, name=None):
    """``table[ids]``: ids of any shape, values in ``[0, rows)``."""
    return apply(GATHER, [table, ids], {}, name)
