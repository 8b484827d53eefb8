"""Setting many variables at once, all-or-nothing: every value is checked before any is written."""
import numpy as np

from ..errors import InputError, describe_shape


def assign_all(variables, values, owner):
    values = list(values)
    if len(values) != len(variables):
        raise InputError(f"{owner}.set_weights: expected {len(variables)} arrays ({', '.join(v.path for v in variables)}), "
                         f"received {len(values)}")
    arrays = []
    for var, value in zip(variables, values):
        value = np.asarray(value)
        if value.shape != var.shape:
            raise InputError(f"{owner}.set_weights: variable {var.path!r} expected shape {describe_shape(var.shape)}, "
                             f"received {describe_shape(value.shape)}")
        arrays.append(value)
    for var, value in zip(variables, arrays):
        var.assign(value)
