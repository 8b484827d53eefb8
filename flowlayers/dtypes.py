"""Engine-neutral dtypes: ``flow.float32`` and friends are plain values named like numpy's."""
import builtins

import numpy as np

from .errors import DTypeError


class DType:
    __slots__ = ("name",)

    def __init__(self, name):
        self.name = name

    @property
    def is_floating(self):
        return self.name in ("float16", "bfloat16", "float32", "float64")

    @property
    def is_integer(self):
        return self.name.startswith(("int", "uint"))

    @property
    def numpy(self):
        """The numpy dtype that holds values of this dtype on the host."""
        if self.name == "bfloat16":
            import ml_dtypes  # ships with every engine that has bfloat16

            return np.dtype(ml_dtypes.bfloat16)
        return np.dtype(self.name)

    def __eq__(self, other):
        return isinstance(other, DType) and other.name == self.name

    def __hash__(self):
        return hash(self.name)

    def __repr__(self):
        return f"flow.{self.name}"


float16 = DType("float16")
bfloat16 = DType("bfloat16")
float32 = DType("float32")
float64 = DType("float64")
int8 = DType("int8")
int32 = DType("int32")
int64 = DType("int64")
bool_ = DType("bool")
float = float32  # noqa: A001 - OneFlow's name for the default float
double = float64

ALL = {d.name: d for d in (float16, bfloat16, float32, float64, int8, int32, int64, bool_)}


def as_dtype(value, what="dtype"):
    """Accept a DType, its name, a numpy dtype or a Python type; name ``what`` on failure."""
    if isinstance(value, DType):
        return value
    if value is None:
        return floatx()
    if value is builtins.int:
        return int32
    if value is builtins.float:
        return float32
    name = value if isinstance(value, str) else getattr(value, "name", None)
    if not isinstance(name, str) or name not in ALL:
        try:
            name = np.dtype(value).name
        except TypeError:
            name = None
    if name in ALL:
        return ALL[name]
    raise DTypeError(f"{what}: expected one of {sorted(ALL)} (or flow.float32 etc.), received {value!r}")


def promote(a, b):
    """Result dtype of a binary op: equal dtypes only, as in OneFlow and TF (no silent casts)."""
    return a if a == b else None


_default_float = [float32]


class default_float:  # noqa: N801 - used as a context manager
    """Within it, layers built without a dtype use ``dtype`` (``function_config().default_data_type``)."""

    def __init__(self, dtype):
        self.dtype = dtype

    def __enter__(self):
        _default_float.append(self.dtype)

    def __exit__(self, *exc):
        _default_float.pop()


def floatx():
    return _default_float[-1]
