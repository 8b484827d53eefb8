"""Family SBP rules shared by many ops, written once (PyTorch DTensor's pointwise rule, OneFlow's)."""
from ..framework.op_def import Signature
from ..sbp import Split, broadcast as B, partial_sum as P


def pointwise(inputs, out_shape, partial=None):
    """Split any output axis that every non-broadcast input shares; all B -> B.

    ``partial`` is the list of input patterns (one SBP per input, P or B) that
    give P, e.g. ``[(P, P)]`` for add and ``[(P, B), (B, P)]`` for multiply.
    """
    rank = len(out_shape)
    sigs = []
    for k in range(rank):
        ins = []
        for x in inputs:
            k_in = k - (rank - x.ndim)        # numpy broadcasting aligns trailing dims
            ins.append(Split(k_in) if k_in >= 0 and x.shape[k_in] == out_shape[k] else B)
        if any(s != B for s in ins):
            sigs.append(Signature(tuple(ins), (Split(k),)))
    sigs.append(Signature((B,) * len(inputs), (B,)))
    sigs.extend(Signature(tuple(p), (P,)) for p in partial or ())
    return sigs


def batch_only(inputs, attrs, n_out=1, keep_axes=(0,)):
    """Ops that can only split along ``keep_axes`` of their first input (and mirror it in outputs)."""
    sigs = [Signature((Split(k),) + (B,) * (len(inputs) - 1), (Split(k),) * n_out) for k in keep_axes]
    return sigs + [Signature((B,) * len(inputs), (B,) * n_out)]
