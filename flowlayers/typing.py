"""Job-function annotations, as in OneFlow::

    def train_job(images: tp.Numpy.Placeholder((100, 1, 28, 28), dtype=flow.float),
                  labels: tp.Numpy.Placeholder((100,), dtype=flow.int32)) -> tp.Numpy:

``Numpy.Placeholder`` is a logical (global) input: pass one array.
``ListNumpy.Placeholder`` is a mirrored input: ``shape`` is per device and the
caller passes a list with one array per device.  As return annotations,
``Numpy`` gives one array and ``ListNumpy`` a list with one array per device.
"""
from typing import Tuple  # noqa: F401 - re-exported for ``tp.Tuple``-style use

from . import dtypes
from .inputs import check_shape


class _Placeholder:
    kind = None

    def __init__(self, shape, dtype=dtypes.float32):
        self.shape = check_shape(shape, f"{type(self).__qualname__}")
        self.dtype = dtypes.as_dtype(dtype, f"{type(self).__qualname__}: dtype")

    def __repr__(self):
        return f"{type(self).__qualname__}({self.shape}, dtype={self.dtype})"


class Numpy:
    """Return annotation: one numpy array holding the logical value."""

    class Placeholder(_Placeholder):
        kind = "numpy"


class ListNumpy:
    """Return annotation: a list with one numpy array per device."""

    class Placeholder(_Placeholder):
        kind = "list"


Numpy.Placeholder.__qualname__ = "tp.Numpy.Placeholder"
ListNumpy.Placeholder.__qualname__ = "tp.ListNumpy.Placeholder"
