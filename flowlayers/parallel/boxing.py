"""Boxing: converting a Blob from one SBP to another over one mesh axis, and its byte cost.

Costs are the bytes each device sends for the collective that does the
conversion (ring algorithms), as OneFlow's boxing cost model counts them.
"""
from ..sbp import Split, broadcast, partial_sum

INFEASIBLE = float("inf")
NOMINAL_BATCH = 64  # stands in for an unknown (None) dim when bytes are estimated


def nbytes(shape, dtype):
    n = 1
    for d in shape:
        n *= NOMINAL_BATCH if d is None else d
    return n * dtype.numpy.itemsize


def collective(src, dst):
    """Name of the collective that turns ``src`` into ``dst`` on one mesh axis, or None if nothing moves."""
    if src == dst:
        return None
    if isinstance(src, Split) and dst == broadcast:
        return "all-gather"
    if src == partial_sum and dst == broadcast:
        return "all-reduce"
    if src == partial_sum and isinstance(dst, Split):
        return "reduce-scatter"
    if isinstance(src, Split) and isinstance(dst, Split):
        return "all-to-all"
    if src == broadcast and isinstance(dst, Split):
        return "slice"
    return "unsupported"


def cost(src, dst, size, n):
    """Bytes sent per device to box a tensor of ``size`` bytes from ``src`` to ``dst`` over ``n`` devices."""
    kind = collective(src, dst)
    if kind is None or n == 1:
        return 0.0 if kind != "unsupported" else INFEASIBLE
    return {
        "slice": 1e-3 * size / n,     # no traffic, but a copy: ties go to the signature that moves nothing
        "all-gather": (n - 1) / n * size,
        "all-reduce": 2 * (n - 1) / n * size,
        "reduce-scatter": (n - 1) / n * size,
        "all-to-all": (n - 1) / n / n * size,
    }.get(kind, INFEASIBLE)
