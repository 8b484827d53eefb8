"""The float64 reference math of tests/ops and tests/layers, in numpy: the few array functions the references are
written with (named as TensorFlow names them, so the references read as the math they are), and gradients by
central differences.  No engine is involved, so the references hold on any backend and on a machine without
TensorFlow.
"""
import functools

import numpy as np
from scipy import special

float64 = np.float64
exp, sqrt, square, abs, tanh = np.exp, np.sqrt, np.square, np.abs, np.tanh     # noqa: A001 (abs: as tf.abs)
minimum, maximum, matmul, einsum, where = np.minimum, np.maximum, np.matmul, np.einsum, np.where
zeros_like, ones_like, argmax = np.zeros_like, np.ones_like, np.argmax


class math:    # noqa: N801 (tf.math's two)
    log = staticmethod(np.log)
    erf = staticmethod(special.erf)


def constant(value, dtype=None):
    return np.array(value, dtype=dtype)


def convert_to_tensor(value, dtype=None):
    return np.asarray(value, dtype=dtype)


def cast(x, dtype):
    return np.asarray(x).astype(dtype)


def as_dtype(dtype):
    return np.dtype(dtype)


def identity(x):
    return np.array(x)


stop_gradient = identity     # central differences need no stopping


def reshape(x, shape):
    return np.reshape(x, [int(d) for d in shape])


def transpose(x, perm):
    return np.transpose(x, perm)


def shape(x):
    return np.array(np.shape(x))


def _axis(axis):
    return tuple(axis) if isinstance(axis, (list, tuple)) else axis


def reduce_sum(x, axis=None, keepdims=False):
    return np.sum(x, axis=_axis(axis), keepdims=keepdims)


def reduce_mean(x, axis=None, keepdims=False):
    return np.mean(x, axis=_axis(axis), keepdims=keepdims)


def reduce_max(x, axis=None, keepdims=False):
    return np.max(x, axis=_axis(axis), keepdims=keepdims)


def pow(a, b):     # noqa: A001 (as tf.pow)
    return np.power(a, b)


def clip_by_value(x, lo, hi):
    return np.clip(x, lo, hi)


def pad(x, paddings, constant_values=0.0):
    return np.pad(x, [tuple(p) for p in paddings], constant_values=constant_values)


def repeat(x, repeats, axis):
    return np.repeat(x, repeats, axis=axis)


def add_n(values):
    return functools.reduce(np.add, values)


def concat(values, axis):
    return np.concatenate(values, axis=axis)


def stack(values, axis=0):
    return np.stack(values, axis=axis)


def gather(params, ids):
    return np.take(params, ids, axis=0)


def one_hot(ids, depth, dtype=np.float32):
    return np.eye(depth, dtype=dtype)[np.asarray(ids)]


def gradients(loss_of, arrays, step=1e-6):
    """d loss_of(arrays) / d each array, by central differences in float64 (``arrays`` are changed in place while
    it runs and restored)."""
    grads = []
    for a in arrays:
        g = np.empty_like(a)
        for idx in np.ndindex(a.shape):
            old = a[idx]
            h = step * max(1.0, float(np.abs(old)))
            a[idx] = old + h
            up = loss_of(arrays)
            a[idx] = old - h
            down = loss_of(arrays)
            a[idx] = old
            g[idx] = (up - down) / (2 * h)
        grads.append(g)
    return grads
