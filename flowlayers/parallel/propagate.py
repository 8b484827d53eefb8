"""SBP propagation: for each mesh axis pick the op signature with the lowest Boxing cost.

Used while a graph is built (so ``blob.sbp`` prints) and by the planner.
"""
from .. import config
from ..sbp import Split, broadcast
from . import boxing


def mesh_axes():
    """``[(name, size), ...]`` of the consistent view's mesh, or None in the mirrored view."""
    if config.view() != "consistent":
        return None
    return list(config.mesh_shape().items())


def _divides(sbp, shape, n):
    if not isinstance(sbp, Split):
        return True
    if sbp.axis >= len(shape):
        return False
    d = shape[sbp.axis]
    return d is None or d % n == 0


def choose(node, specs, axis_index, n):
    """The cheapest legal signature of ``node`` on one mesh axis of ``n`` devices, and its cost."""
    in_sbps = [x.sbp[axis_index] for x in node.inputs]
    best, best_cost = None, boxing.INFEASIBLE
    for sig in node.op.signatures(node.inputs, node.attrs):
        if not all(_divides(s, x.shape, n) for s, x in zip(sig.inputs, node.inputs)):
            continue
        if not all(_divides(s, shape, n) for s, (shape, _) in zip(sig.outputs, specs)):
            continue
        c = sum(boxing.cost(cur, want, boxing.nbytes(x.shape, x.dtype), n)
                for cur, want, x in zip(in_sbps, sig.inputs, node.inputs))
        if c < best_cost:
            best, best_cost = sig, c
    return best, best_cost


def infer_sbp(node, specs):
    """nd-SBP of each output of ``node`` (a list, one tuple per output), or Nones outside the consistent view."""
    axes = mesh_axes()
    if axes is None or any(x.sbp is None for x in node.inputs):
        return [None] * len(specs)
    if "sbp" in node.attrs:               # sources (placeholders, variables) and constraints state theirs
        return [node.attrs["sbp"]] * len(specs)
    per_axis = []
    for i, (_, n) in enumerate(axes):
        sig, _ = choose(node, specs, i, n)
        per_axis.append(sig.outputs if sig else (broadcast,) * len(specs))
    return [tuple(outs[k] for outs in per_axis) for k in range(len(specs))]
