"""OneFlow 0.x's ``flow.distribute``: how a variable or a Blob lies over the devices of a one-axis placement.

    w = flow.get_variable("fc-weight", (1024, 784), distribute=flow.distribute.split(0))
    h = flow.layers.dense(x, 1024, model_distribute=flow.distribute.split(0))     # model parallel
    y = h.with_distribute(flow.distribute.broadcast())

A split is over the ``model`` mesh axis where the mesh has one (``set_mesh(data=2, model=2)``), else over the
only axis of a one-axis mesh, as on OneFlow's one-axis placements.  It applies in the consistent view, which
alone lays tensors out; the mirrored view keeps whole copies on every device (as OneFlow's mirrored view does).
"""
from dataclasses import dataclass

from .errors import SBPError
from .sbp import Split, broadcast as _broadcast


@dataclass(frozen=True)
class Distribute:
    """A split along ``axis`` of the tensor, or (``axis`` None) a broadcast."""
    axis: object = None

    def __repr__(self):
        return "flow.distribute.broadcast()" if self.axis is None else f"flow.distribute.split({self.axis})"

    @property
    def sbp(self):
        return _broadcast if self.axis is None else Split(self.axis)


def split(axis):
    if isinstance(axis, bool) or not isinstance(axis, int):
        raise SBPError(f"flow.distribute.split(axis): expected an int tensor axis, received {axis!r}")
    return Distribute(axis)


def broadcast():
    return Distribute(None)


def auto():
    """OneFlow's "let the system decide": a broadcast variable here, laid out by the planner where it is used."""
    return Distribute(None)


def check(value, what):
    if not isinstance(value, Distribute):
        raise SBPError(f"{what}: expected flow.distribute.split(axis), broadcast() or auto(), received {value!r}")
    return value


def mesh_axis(mesh, what):
    """The mesh axis a OneFlow split goes over: ``model`` if the mesh has it, else its only axis."""
    axes = list(mesh)
    if "model" in axes:
        return "model"
    if len(axes) == 1:
        return axes[0]
    raise SBPError(f"{what}: a flow.distribute split expected a mesh with a 'model' axis or a single axis, "
                   f"received the mesh axes {axes}; name the axis with a layout rule or blob.with_sbp instead")
