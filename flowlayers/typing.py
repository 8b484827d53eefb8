"""Job-function annotations, as in OneFlow::

    def train_job(images: tp.Numpy.Placeholder((100, 1, 28, 28), dtype=flow.float),
                  labels: tp.Numpy.Placeholder((100,), dtype=flow.int32)) -> tp.Numpy:

``Numpy.Placeholder`` is a logical (global) input: pass one array.
``ListNumpy.Placeholder`` is a mirrored input: ``shape`` is per device and the
caller passes a list with one array per device.  As return annotations,
``Numpy`` gives one array and ``ListNumpy`` a list with one array per device;
``ListListNumpy`` (mirrored view) a list per device of one array per sample;
``Callback[...]`` makes the job asynchronous: ``job(x)(callback)``.
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


class ListListNumpy:
    """Return annotation (mirrored view): per device, a list with one array per sample of that device."""


class Callback:
    """Return annotation of an asynchronous job: ``-> tp.Callback[tp.Numpy]``.  Calling the job runs its step
    and returns a function; ``job(x, y)(callback)`` hands the result (of the inner annotation) to ``callback``.
    Each call's result goes to its own callback, in call order; an error of the step is raised by the job call
    itself, and an error of the callback by the call that hands the result over: none is swallowed."""

    def __init__(self, inner):
        self.inner = inner

    def __class_getitem__(cls, inner):
        return cls(inner)

    def __repr__(self):
        return f"tp.Callback[{getattr(self.inner, '__qualname__', self.inner)}]"


Numpy.Placeholder.__qualname__ = "tp.Numpy.Placeholder"
ListNumpy.Placeholder.__qualname__ = "tp.ListNumpy.Placeholder"
