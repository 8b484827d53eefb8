"""Embedding lookup: rows of a table gathered by integer ids."""
from ..errors import DTypeError, ShapeError, describe_shape
from ..framework.graph import apply
from ..framework.op_def import OpDef, Signature
from ..sbp import Split as S, broadcast as B


def _infer(inputs, attrs):
    table, ids = inputs
    if not ids.dtype.is_integer:
        raise DTypeError(f"expected integer ids, received dtype {ids.dtype}")
    if table.ndim != 2:
        raise ShapeError(f"expected a 2-D table (rows, dim), received {describe_shape(table.shape)}")
    return [(ids.shape + table.shape[1:], table.dtype)]


def _signatures(inputs, attrs):
    table, ids = inputs
    return ([Signature((B, S(k)), (S(k),)) for k in range(ids.ndim)]
            + [Signature((S(1), B), (S(ids.ndim),)), Signature((B, B), (B,))])


GATHER = OpDef("gather", _infer, _signatures)


def gather(table, ids, name=None):
    """``table[ids]``: ids of any shape, values in ``[0, rows)``."""
    return apply(GATHER, [table, ids], {}, name)
