"""What a user does with a Blob beyond the graph, given to the ``Blob`` class here, where all it needs is below.

``framework/blob.py`` stands under the ops that make Blobs, so it cannot build ops itself; this module, run by
``import flowlayers``, gives the class its operators (the same ops as ``flow.math.*``, so they plan and lower
alike), and the members that read the settings in force: ``sbp`` (the plan's nd-SBP), ``with_sbp`` and
``with_distribute`` (SBP constraints for the mesh in force).  TensorFlow's math ops give its Tensor its operators
the same way.
"""
from . import distribute as distribute_mod, engine, settings
from .errors import SBPError, describe_shape
from .framework.blob import Blob
from .framework.compiled import planned_sbp
from .ops import elementwise
from .ops.matmul import matmul
from .ops.shape import sbp_constraint


def sbp(self):
    """The nd-SBP (one per mesh axis) the planner gives this Blob on the placement in force, read from the one
    plan: a compiled program's that holds it, else that of the graph making it; None in the mirrored view."""
    return planned_sbp(self, engine.placement())


def with_sbp(self, *nd_sbp):
    """Constrain this Blob to ``nd_sbp`` (one SBP per mesh axis); Boxing is inserted where needed."""
    name = engine.backend_name()
    axes = list(settings.mesh_shape().items()) if settings.view() == "consistent" else None
    return sbp_constraint(self, nd_sbp, axes, engine.capabilities(name).splits_dim_over_several_axes, name)


def with_distribute(self, distribute):
    """OneFlow 0.x's ``with_sbp`` for its one-axis placements: ``flow.distribute.split(k)`` or
    ``broadcast()`` on a one-axis mesh (a mesh of several axes takes ``with_sbp``, one SBP per axis)."""
    distribute_mod.check(distribute, f"Blob {self.name!r}.with_distribute")
    axes = list(settings.mesh_shape())
    if len(axes) != 1:
        raise SBPError(f"Blob {self.name!r}.with_distribute({distribute!r}): expected a one-axis mesh, received "
                       f"the mesh axes {axes}; use blob.with_sbp(...) with one SBP per axis")
    return self.with_sbp(distribute.sbp)


def blob_repr(self):
    nd = self.sbp
    shown = "" if nd is None else f", sbp={'(' + ', '.join(map(repr, nd)) + ')'}"
    return f"Blob(name={self.name!r}, shape={describe_shape(self.shape)}, dtype={self.dtype}{shown})"


def _binary(op, swap=False):
    if swap:
        return lambda self, other: op(other, self)
    return lambda self, other: op(self, other)


Blob.sbp = property(sbp)
Blob.with_sbp = with_sbp
Blob.with_distribute = with_distribute
Blob.__repr__ = blob_repr
for _name, _op in (("add", elementwise.add), ("sub", elementwise.subtract), ("mul", elementwise.multiply),
                   ("truediv", elementwise.divide)):
    setattr(Blob, f"__{_name}__", _binary(_op))
    setattr(Blob, f"__r{_name}__", _binary(_op, swap=True))
Blob.__matmul__ = _binary(matmul)
Blob.__neg__ = elementwise.negative
