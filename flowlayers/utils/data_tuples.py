"""Keras 3's ``(x, y, sample_weight)`` packing, as ``train_step`` receives its data."""
from ..errors import InputError


def pack_x_y_sample_weight(x, y=None, sample_weight=None):
    """``x`` alone, ``(x, y)`` or ``(x, y, sample_weight)``; an ``x`` that is a tuple or list is kept whole."""
    if y is None:
        return (x,) if isinstance(x, (tuple, list)) else x
    return (x, y) if sample_weight is None else (x, y, sample_weight)


def unpack_x_y_sample_weight(data):
    """``(x, y, sample_weight)`` from a batch as ``fit`` gives it, missing parts None."""
    if isinstance(data, list):
        data = tuple(data)
    if not isinstance(data, tuple):
        return data, None, None
    if 1 <= len(data) <= 3:
        return tuple(data) + (None,) * (3 - len(data))
    raise InputError(f"unpack_x_y_sample_weight: expected a batch of (x,), (x, y) or (x, y, sample_weight), received "
                     f"a tuple of {len(data)}")
