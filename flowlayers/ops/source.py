"""Source nodes: placeholders (inputs fed per step) and variables (state held by the engine)."""
from ..framework.graph import apply
from ..framework.op_def import OpDef

PLACEHOLDER = OpDef("placeholder", lambda inputs, attrs: [(attrs["shape"], attrs["dtype"])], lambda i, a: [],
                    kind="placeholder")
VARIABLE = OpDef("variable", lambda inputs, attrs: [(attrs["shape"], attrs["dtype"])],
                 lambda i, a: [], kind="variable")


def placeholder(shape, dtype, name, kind="numpy"):
    """A logical input; ``kind`` 'numpy' (global batch, split over ``data``) or 'list' (one array per device)."""
    return apply(PLACEHOLDER, [], {"shape": tuple(shape), "dtype": dtype, "kind": kind}, name)


def variable(var):
    """The Blob that reads Variable ``var`` in the graph being built."""
    return apply(VARIABLE, [], {"shape": var.shape, "dtype": var.dtype}, var.path, variable=var)
