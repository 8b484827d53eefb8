"""Blob: a logical tensor in the graph, known by shape, dtype and (consistent view) nd-SBP.

Blobs carry no data.  They are printable while a model is being built::

    >>> x = flow.Input((1, 28, 28), batch_size=100)
    >>> x.shape, x.dtype
    ((100, 1, 28, 28), flow.float32)

What a Blob does beyond the graph needs the floors above this one: its operators (``+ - * / @``, negation) build
ops, and ``sbp``, ``with_sbp`` and ``with_distribute`` read the plan of the placement in force.  Those floors give
them to the class (``flowlayers/blob_api.py``, run by ``import flowlayers``), as TensorFlow's math ops give its
Tensor its operators; this module stays below the ops that make Blobs.
"""
from ..errors import GraphError


class Blob:
    __slots__ = ("node", "index", "shape", "dtype", "call", "__weakref__")

    def __init__(self, node, index, shape, dtype):
        self.node, self.index = node, index
        self.shape, self.dtype = tuple(shape), dtype
        self.call = None  # (Call, output index) when a layer or model call returned this Blob

    @property
    def name(self):
        return self.node.name if len(self.node.outputs) <= 1 else f"{self.node.name}:{self.index}"

    @property
    def ndim(self):
        return len(self.shape)

    @property
    def op(self):
        return self.node.op.name

    def __bool__(self):
        raise GraphError(f"Blob {self.name!r} has no value while the graph is built; "
                         f"expected a Python bool, received a symbolic Blob (use flow ops instead of if/and/or)")

    def __array__(self, *args, **kwargs):
        raise GraphError(f"Blob {self.name!r} has no value while the graph is built; expected a numpy array, "
                         f"received a symbolic Blob (compute with flow ops; in a custom step, return it in the logs)")

    def __float__(self):
        raise GraphError(f"Blob {self.name!r} has no value while the graph is built; expected a Python number, "
                         f"received a symbolic Blob (compute with flow ops instead)")

    __hash__ = object.__hash__
