"""``flow.Input``: a Keras-style logical input, the same node as a ``tp.Numpy.Placeholder``; and the checks
fed values get before a step runs."""
import numpy as np

from . import dtypes
from .errors import InputError, ShapeError
from .framework import naming
from .ops import source

# Ops one of whose inputs indexes something: op name -> (that input, size of what it indexes, what it holds, how to
# make room for more).
# The engine fails on an index out of range mid-step (or, on GPU, silently reads zeros), so one fed
# straight from an input is checked on the host first.
_INDEXING = {
    "sparse_softmax_cross_entropy": (0, lambda node: node.inputs[1].shape[-1], "class labels",
                                     "give the logits one column per class"),
    "one_hot": (0, lambda node: node.attrs["depth"], "indices", "raise one_hot's depth"),
    "gather": (1, lambda node: node.inputs[0].shape[0], "ids", "give the Embedding a larger input_dim"),
}


def check_shape(shape, what):
    if not isinstance(shape, (tuple, list)) or not all(
            d is None or (isinstance(d, int) and not isinstance(d, bool) and d > 0) for d in shape):
        raise ShapeError(f"{what}: shape expected a tuple of positive ints (or None), received {shape!r}")
    return tuple(shape)


def Input(shape, batch_size=None, dtype=dtypes.float32, name=None):  # noqa: N802 - Keras' name
    """A model input of per-example ``shape``; the logical batch is ``batch_size`` (None: any).

    >>> x = flow.Input((1, 28, 28), batch_size=100)
    >>> x.shape
    (100, 1, 28, 28)
    """
    shape = check_shape(shape, "flow.Input")
    if batch_size is not None and (not isinstance(batch_size, int) or batch_size <= 0):
        raise ShapeError(f"flow.Input: batch_size expected a positive int or None, received {batch_size!r}")
    name = name or naming.unique_name("input")
    return source.placeholder((batch_size,) + shape, dtypes.as_dtype(dtype, f"flow.Input {name!r}: dtype"), name)


def index_ranges(nodes, inputs):
    """``[(i, node, size, what)]``: input ``i`` is used by op ``node`` as ``what``, which must lie in [0, size)."""
    position = {id(x): i for i, x in enumerate(inputs)}
    found = []
    for node in nodes:
        rule = _INDEXING.get(node.op.name)
        if rule is not None and id(node.inputs[rule[0]]) in position and rule[1](node) is not None:
            found.append((position[id(node.inputs[rule[0]])], node, rule[1](node), rule[2]))
    return found


def check_range(value, node, size, what, where):
    """InputError naming ``where`` and the op if any value of ``value`` lies outside [0, size)."""
    value = np.asarray(value)
    if value.size and (value.min() < 0 or value.max() >= size):
        op = f"layer {node.layer.name!r}, op {node.op.name!r}" if node.layer else f"op {node.name!r}"
        raise InputError(f"{where} feeds the {what} of {op}: expected values in [0, {size}), received values in "
                         f"[{value.min()}, {value.max()}]; remap them into [0, {size}), or "
                         f"{_INDEXING[node.op.name][3]}")

