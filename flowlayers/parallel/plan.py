"""Planning a Program for the consistent view: an nd-SBP for every Blob, from its sources.

Placeholders split their batch over the ``data`` axis (when it divides),
variables follow their layout rules, constraints are honoured, and every
other op takes the signature with the cheapest Boxing (see propagate.choose).
"""
from ..sbp import Split, broadcast
from . import propagate


def source_sbp(node, axes, batch=None):
    """nd-SBP of a placeholder (given the fed batch size) or a variable."""
    if node.op.name == "variable":
        return node.attrs["variable"].nd_sbp([a for a, _ in axes])
    shape = node.outputs[0].shape
    batch = shape[0] if batch is None and shape else batch
    return tuple(Split(0) if a == "data" and shape and (batch is None or batch % n == 0) else broadcast
                 for a, n in axes)


def plan(nodes, axes, batch=None):
    """{Blob: nd-SBP} for every output of ``nodes`` on mesh ``axes`` ([(name, size), ...])."""
    sbps = {}

    def fed(shape):   # an unknown (None) dim is the batch: plan with the size actually fed
        return tuple(batch if d is None else d for d in shape)

    class _View:   # a Blob as the planner sees it: shape, dtype and the planned SBP
        __slots__ = ("shape", "dtype", "sbp", "ndim")

        def __init__(self, blob):
            self.shape, self.dtype, self.sbp, self.ndim = fed(blob.shape), blob.dtype, sbps[blob], blob.ndim

    class _Node:
        __slots__ = ("op", "inputs", "attrs")

        def __init__(self, node):
            self.op, self.attrs = node.op, node.attrs
            self.inputs = [_View(x) for x in node.inputs]

    for node in nodes:
        if node.op.name in ("placeholder", "variable"):
            nd = source_sbp(node, axes, batch)
            sbps.update({b: nd for b in node.outputs})
            continue
        if node.op.name in ("sbp_constraint", "constant"):
            sbps.update({b: node.attrs.get("sbp") or (broadcast,) * len(axes) for b in node.outputs})
            continue
        view = _Node(node)
        specs = [(fed(b.shape), b.dtype) for b in node.outputs]
        per_axis = []
        for i, (_, n) in enumerate(axes):
            sig, _ = propagate.choose(view, specs, i, n)
            per_axis.append(sig.outputs if sig else (broadcast,) * len(specs))
        for k, b in enumerate(node.outputs):
            sbps[b] = tuple(outs[k] for outs in per_axis)
    return sbps
