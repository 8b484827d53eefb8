"""``flow.Input``: a Keras-style logical input, the same node as a ``tp.Numpy.Placeholder``; and the checks
fed values get before a step runs."""
import numpy as np

from . import dtypes
from .errors import InputError, ShapeError, describe_shape
from .framework import naming
from .framework.blob import Blob
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


def Input(shape=None, batch_size=None, dtype=None, sparse=None, ragged=None, batch_shape=None, name=None,  # noqa: N802
          tensor=None, optional=False):
    """Keras 3's ``Input``: a model input of per-example ``shape`` (or ``batch_shape``, the batch first); the
    logical batch is ``batch_size`` (None: any); ``dtype`` float32 when None.  ``tensor``, an input Blob, is
    returned as it is.  Sparse, ragged and optional inputs are refused by name.

    >>> x = flow.Input((1, 28, 28), batch_size=100)
    >>> x.shape
    (100, 1, 28, 28)
    """
    what = "flow.Input" if name is None else f"flow.Input {name!r}"
    for key, value in (("sparse", sparse), ("ragged", ragged), ("optional", optional)):
        if value:
            raise InputError(f"{what}: {key}=True is not supported by flowlayers (every input is a dense tensor fed "
                             f"each step); expected {key}={'False' if key == 'optional' else 'None'}, received "
                             f"{value!r}")
    if tensor is not None:
        return _wrapped(tensor, shape, batch_size, batch_shape, dtype, what)
    if (shape is None) == (batch_shape is None):
        raise ShapeError(f"{what}: expected shape or batch_shape (one of them), received "
                         f"shape={shape!r}, batch_shape={batch_shape!r}")
    if batch_shape is not None:
        if batch_size is not None:
            raise ShapeError(f"{what}: expected batch_size or batch_shape, not both; received batch_size="
                             f"{batch_size!r} and batch_shape={batch_shape!r}")
        batch_shape = check_shape(batch_shape, what)
        if not batch_shape:
            raise ShapeError(f"{what}: batch_shape expected the batch first, received {batch_shape!r}")
        shape, batch_size = batch_shape[1:], batch_shape[0]
    shape = check_shape(shape, what)
    if batch_size is not None and (not isinstance(batch_size, int) or batch_size <= 0):
        raise ShapeError(f"{what}: batch_size expected a positive int or None, received {batch_size!r}")
    name = name or naming.unique_name("input")
    return source.placeholder((batch_size,) + shape, dtypes.as_dtype(dtype, f"flow.Input {name!r}: dtype"), name)


def InputLayer(shape=None, batch_size=None, dtype=None, sparse=None, ragged=None, batch_shape=None,  # noqa: N802
               input_tensor=None, optional=False, name=None):
    """Keras 3's ``InputLayer``, the layer form of ``Input``: it gives the same input Blob (put it first in a
    Sequential, or start a functional model from it)."""
    return Input(shape, batch_size, dtype, sparse, ragged, batch_shape, name, input_tensor, optional)


def _wrapped(tensor, shape, batch_size, batch_shape, dtype, what):
    """``tensor`` given to ``Input(tensor=...)``: an input Blob whose shape and dtype agree with those given."""
    if not isinstance(tensor, Blob) or tensor.node.op.kind != "placeholder":
        raise InputError(f"{what}: tensor expected an input Blob (from flow.Input), received "
                         f"{type(tensor).__name__} {tensor!r}")
    wanted = (None if batch_shape is None else tuple(batch_shape),
              None if shape is None else (tensor.shape[0],) + tuple(shape),
              None if batch_size is None else (batch_size,) + tensor.shape[1:])
    for want in wanted:
        if want is not None and want != tensor.shape:
            raise ShapeError(f"{what}: expected the shape of tensor {tensor.name!r}, {describe_shape(tensor.shape)}, "
                             f"received {describe_shape(want)}")
    if dtype is not None and dtypes.as_dtype(dtype, what) != tensor.dtype:
        raise InputError(f"{what}: expected the dtype of tensor {tensor.name!r}, {tensor.dtype.name}, received "
                         f"{dtype!r}")
    return tensor


def index_ranges(nodes, inputs):
    """``[(i, node, size, what)]``: input ``i`` is used by op ``node`` as ``what``, which must lie in [0, size)."""
    position = {id(x): i for i, x in enumerate(inputs)}
    found = []
    for node in nodes:
        rule = _INDEXING.get(node.op.name)
        fed = rule and _uncast(node.inputs[rule[0]])
        if rule is not None and id(fed) in position and rule[1](node) is not None:
            found.append((position[id(fed)], node, rule[1](node), rule[2]))
    return found


def _uncast(blob):
    """The Blob ``blob`` is a cast of (Embedding's ids cast to int32), or ``blob``: its values are the fed ones."""
    while blob.node.op.name == "cast":
        blob = blob.node.inputs[0]
    return blob


def check_range(value, node, size, what, where):
    """InputError naming ``where`` and the op if any value of ``value`` lies outside [0, size)."""
    value = np.asarray(value)
    if value.size and (value.min() < 0 or value.max() >= size):
        op = f"layer {node.layer.name!r}, op {node.op.name!r}" if node.layer else f"op {node.name!r}"
        raise InputError(f"{where} feeds the {what} of {op}: expected values in [0, {size}), received values in "
                         f"[{value.min()}, {value.max()}]; remap them into [0, {size}), or "
                         f"{_INDEXING[node.op.name][3]}")

