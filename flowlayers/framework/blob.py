"""Blob: a logical tensor in the graph, known by shape, dtype and (consistent view) nd-SBP.

Blobs carry no data.  They are printable while a model is being built::

    >>> x = flow.Input((1, 28, 28), batch_size=100)
    >>> x.shape, x.dtype
    ((100, 1, 28, 28), flow.float32)
"""
from ..errors import SBPError, describe_shape


class Blob:
    __slots__ = ("node", "index", "shape", "dtype", "call", "__weakref__")

    def __init__(self, node, index, shape, dtype):
        self.node, self.index = node, index
        self.shape, self.dtype = tuple(shape), dtype
        self.call = None  # (Call, output index) when a layer or model call returned this Blob

    @property
    def sbp(self):
        """The nd-SBP (one per mesh axis) the planner gives this Blob on the placement in force, read from the
        one plan: a compiled program's that holds it, else that of the graph making it; None in the mirrored
        view."""
        from .compiled import planned_sbp

        return planned_sbp(self)

    @property
    def name(self):
        return self.node.name if len(self.node.outputs) <= 1 else f"{self.node.name}:{self.index}"

    @property
    def ndim(self):
        return len(self.shape)

    @property
    def op(self):
        return self.node.op.name

    def with_sbp(self, *nd_sbp):
        """Constrain this Blob to ``nd_sbp`` (one SBP per mesh axis); Boxing is inserted where needed."""
        from ..ops import shape as shape_ops

        return shape_ops.sbp_constraint(self, nd_sbp)

    def with_distribute(self, distribute):
        """OneFlow 0.x's ``with_sbp`` for its one-axis placements: ``flow.distribute.split(k)`` or
        ``broadcast()`` on a one-axis mesh (a mesh of several axes takes ``with_sbp``, one SBP per axis)."""
        from .. import config, distribute as distribute_mod

        distribute_mod.check(distribute, f"Blob {self.name!r}.with_distribute")
        axes = list(config.mesh_shape())
        if len(axes) != 1:
            raise SBPError(f"Blob {self.name!r}.with_distribute({distribute!r}): expected a one-axis mesh, received "
                           f"the mesh axes {axes}; use blob.with_sbp(...) with one SBP per axis")
        return self.with_sbp(distribute.sbp)

    def __repr__(self):
        sbp = "" if self.sbp is None else f", sbp={'(' + ', '.join(map(repr, self.sbp)) + ')'}"
        return f"Blob(name={self.name!r}, shape={describe_shape(self.shape)}, dtype={self.dtype}{sbp})"

    # Operators: the same ops as flow.math.*, so they plan and lower alike.
    def _math(self, name, other, swap=False):
        from ..ops import elementwise

        a, b = (other, self) if swap else (self, other)
        return getattr(elementwise, name)(a, b)

    def __add__(self, o): return self._math("add", o)
    def __radd__(self, o): return self._math("add", o, True)
    def __sub__(self, o): return self._math("subtract", o)
    def __rsub__(self, o): return self._math("subtract", o, True)
    def __mul__(self, o): return self._math("multiply", o)
    def __rmul__(self, o): return self._math("multiply", o, True)
    def __truediv__(self, o): return self._math("divide", o)
    def __rtruediv__(self, o): return self._math("divide", o, True)

    def __matmul__(self, o):
        from ..ops import matmul

        return matmul.matmul(self, o)

    def __neg__(self):
        from ..ops import elementwise

        return elementwise.negative(self)

    def __bool__(self):
        from ..errors import GraphError

        raise GraphError(f"Blob {self.name!r} has no value while the graph is built; "
                         f"expected a Python bool, received a symbolic Blob (use flow ops instead of if/and/or)")

    __hash__ = object.__hash__
