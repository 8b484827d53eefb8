"""matmul: OneFlow's signatures S(0)xB->S(0), BxS(1)->S(1), S(1)xS(0)->P, PxB->P, BxP->P."""
from ..errors import DTypeError, ShapeError, describe_shape
from ..framework.graph import apply
from ..framework.op_def import OpDef, Signature
from ..sbp import Split as S, broadcast as B, partial_sum as P


def _dims(attrs, a_rank, b_rank):
    """(row axis of a, contracted axis of a, contracted axis of b, col axis of b)."""
    ra, ka = (a_rank - 1, a_rank - 2) if attrs.get("transpose_a") else (a_rank - 2, a_rank - 1)
    kb, cb = (b_rank - 1, b_rank - 2) if attrs.get("transpose_b") else (b_rank - 2, b_rank - 1)
    return ra, ka, kb, cb


def _infer(inputs, attrs):
    a, b = inputs
    if a.ndim < 2 or b.ndim < 2:
        raise ShapeError(f"matmul expected operands of rank >= 2, received shapes {describe_shape(a.shape)} and "
                         f"{describe_shape(b.shape)}")
    if a.dtype != b.dtype:
        raise DTypeError(f"matmul expected operands of one dtype, received {a.dtype} and {b.dtype}")
    ra, ka, kb, cb = _dims(attrs, a.ndim, b.ndim)
    if None not in (a.shape[ka], b.shape[kb]) and a.shape[ka] != b.shape[kb]:
        raise ShapeError(f"matmul expected the contracted dims to match, received {describe_shape(a.shape)} @ "
                         f"{describe_shape(b.shape)} ({a.shape[ka]} != {b.shape[kb]})")
    if b.ndim > 2 and a.shape[:-2] != b.shape[:-2]:
        raise ShapeError(f"batched matmul expected equal batch dims, received {describe_shape(a.shape)} and "
                         f"{describe_shape(b.shape)}")
    return [(a.shape[:-2] + (a.shape[ra], b.shape[cb]), a.dtype)]


def _signatures(inputs, attrs):
    a, b = inputs
    ra, ka, kb, cb = _dims(attrs, a.ndim, b.ndim)
    out_rank = a.ndim
    sigs = [
        Signature((S(ra), B), (S(out_rank - 2),)),
        Signature((B, S(cb)), (S(out_rank - 1),)),
        Signature((S(ka), S(kb)), (P,)),
        Signature((P, B), (P,)),
        Signature((B, P), (P,)),
        Signature((B, B), (B,)),
    ]
    for k in range(out_rank - 2):           # batch dims of a batched matmul
        sigs.append(Signature((S(k), S(k) if b.ndim > 2 else B), (S(k),)))
    return sigs


MATMUL = OpDef("matmul", _infer, _signatures)


def matmul(a, b, transpose_a=False, transpose_b=False, name=None):
    """``a @ b`` over the last two dims (batched when ranks exceed 2)."""
    return apply(MATMUL, [a, b], {"transpose_a": bool(transpose_a), "transpose_b": bool(transpose_b)}, name)
