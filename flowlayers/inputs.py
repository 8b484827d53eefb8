"""``flow.Input``: a Keras-style logical input, the same node as a ``tp.Numpy.Placeholder``."""
from . import dtypes
from .errors import ShapeError
from .framework import naming
from .ops import source


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
