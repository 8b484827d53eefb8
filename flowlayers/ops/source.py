"""Source nodes: placeholders (inputs fed per step) and variables (state held by the engine)."""
from .. import config
from ..framework.graph import apply
from ..framework.op_def import OpDef
from ..parallel.propagate import mesh_axes
from ..sbp import Split, broadcast

PLACEHOLDER = OpDef("placeholder", lambda inputs, attrs: [(attrs["shape"], attrs["dtype"])], lambda i, a: [],
                    kind="placeholder")
VARIABLE = OpDef("variable", lambda inputs, attrs: [(attrs["shape"], attrs["dtype"])],
                 lambda i, a: [], kind="variable")


def placeholder(shape, dtype, name, kind="numpy"):
    """A logical input; ``kind`` 'numpy' (global batch, split over ``data``) or 'list' (one array per device)."""
    attrs = {"shape": tuple(shape), "dtype": dtype, "kind": kind}
    axes = mesh_axes()
    if axes is not None:
        attrs["sbp"] = tuple(Split(0) if a == "data" and len(shape) and (shape[0] is None or shape[0] % n == 0)
                             else broadcast for a, n in axes)   # as the planner will (plan.source_sbp)
    return apply(PLACEHOLDER, [], attrs, name)


def variable(var):
    """The Blob that reads Variable ``var`` in the graph being built."""
    attrs = {"shape": var.shape, "dtype": var.dtype}
    axes = mesh_axes()
    if axes is not None:
        attrs["sbp"] = var.nd_sbp(dict(axes), config.layout_rules())
    return apply(VARIABLE, [], attrs, var.path, variable=var)
