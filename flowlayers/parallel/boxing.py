"""Boxing: converting a Blob from one SBP to another over one mesh axis, and its byte cost.

Costs are the bytes each device sends for the collective that does the
conversion (ring algorithms), as OneFlow's boxing cost model counts them.
Conversions that move nothing (B->S slice, B->P or S->P keeping the value on
one device and zeros elsewhere) cost a token 1e-3 of the size, so that among
otherwise equal signatures the planner prefers the one that copies nothing.
"""
from ..sbp import Split, broadcast, partial_sum

INFEASIBLE = float("inf")
NOMINAL_BATCH = 64  # stands in for an unknown (None) dim when bytes are estimated

LOCAL = ("slice", "zero-fill")   # done on each device without communication


def nbytes(shape, dtype):
    n = 1
    for d in shape:
        n *= NOMINAL_BATCH if d is None else d
    return n * dtype.numpy.itemsize


def collective(src, dst):
    """Name of the collective that turns ``src`` into ``dst`` on one mesh axis, or None if nothing moves."""
    if src == dst:
        return None
    if dst == partial_sum:
        return "zero-fill"
    if isinstance(src, Split):
        return "all-gather" if dst == broadcast else "all-to-all"
    if src == partial_sum:
        return "all-reduce" if dst == broadcast else "reduce-scatter"
    return "slice"


def cost(src, dst, size, n):
    """Bytes sent per device to box a tensor of ``size`` bytes from ``src`` to ``dst`` over ``n`` devices."""
    kind = collective(src, dst)
    if kind is None or n == 1:
        return 0.0
    if kind in LOCAL:
        return 1e-3 * size / n
    return {
        "all-gather": (n - 1) / n * size,
        "all-reduce": 2 * (n - 1) / n * size,
        "reduce-scatter": (n - 1) / n * size,
        "all-to-all": (n - 1) / n / n * size,
    }[kind]
