"""Keras 3's array helpers for preparing data: ``to_categorical``, ``normalize`` and ``pad_sequences``."""
import numpy as np

from ..errors import ConfigError, InputError
from ..framework.blob import Blob
from ..ops import keras_nn


def to_categorical(x, num_classes=None):
    """Class ids -> one-hot rows (float64 for numpy input, as Keras gives), the last axis of size 1 dropped first;
    ``num_classes`` None: the largest id + 1.  On a Blob (in a model), Keras' ``ops.one_hot``."""
    if isinstance(x, Blob):
        if not num_classes:
            raise ConfigError(f"to_categorical: expected num_classes for a Blob (its ids are known only when the "
                              f"model runs), received {num_classes!r}")
        if x.ndim > 1 and x.shape[-1] == 1:
            x = x.reshape(x.shape[:-1])
        return keras_nn.one_hot(x, num_classes)
    ids = np.asarray(x)
    if ids.dtype.kind == "f" and not np.array_equal(ids, np.round(ids)):
        raise InputError(f"to_categorical: expected integer class ids, received non-integral values such as "
                         f"{float(ids[ids != np.round(ids)].flat[0])!r}")
    ids = ids.astype(np.int64)
    shape = ids.shape[:-1] if ids.ndim > 1 and ids.shape[-1] == 1 else ids.shape
    flat = ids.reshape(-1)
    classes = int(flat.max()) + 1 if not num_classes and flat.size else num_classes
    if flat.size and (flat.min() < 0 or flat.max() >= classes):
        raise InputError(f"to_categorical: expected class ids in [0, {classes}), received values from "
                         f"{int(flat.min())} to {int(flat.max())}")
    out = np.zeros((flat.size, classes or 0))
    out[np.arange(flat.size), flat] = 1
    return out.reshape(shape + (classes or 0,))


def normalize(x, axis=-1, order=2):
    """``x`` divided by its ``order``-norm along ``axis`` (a zero norm leaves the values as they are)."""
    if not isinstance(x, np.ndarray):
        return keras_nn.normalize(x, axis=axis, order=order)
    norm = np.atleast_1d(np.linalg.norm(x, order, axis))
    norm[norm == 0] = 1
    return x / np.expand_dims(norm, -1 if axis is None else axis)     # Keras' `axis or -1` fails for axis 0


SIDES = ("pre", "post")


def pad_sequences(sequences, maxlen=None, dtype="int32", padding="pre", truncating="pre", value=0.0):
    """Sequences of different lengths -> one ``(len(sequences), maxlen, ...)`` array: shorter ones filled with
    ``value`` before (``padding="pre"``) or after them, longer ones cut at the start (``truncating="pre"``) or end.
    ``maxlen`` None: the longest; each element's own shape comes from the first non-empty sequence."""
    for name, side in (("padding", padding), ("truncating", truncating)):
        if side not in SIDES:
            raise ConfigError(f"pad_sequences: {name} expected one of {list(SIDES)}, received {side!r}")
    if not hasattr(sequences, "__len__"):
        raise InputError(f"pad_sequences: sequences expected a list of sequences, received {type(sequences).__name__}")
    lengths = []
    for i, seq in enumerate(sequences):
        if not hasattr(seq, "__len__"):
            raise InputError(f"pad_sequences: sequences expected a list of sequences, received {seq!r} at "
                             f"position {i}")
        lengths.append(len(seq))
    element = next((np.asarray(s).shape[1:] for s in sequences if len(s)), ())
    text = np.issubdtype(dtype, np.str_) or np.issubdtype(dtype, np.bytes_)
    if isinstance(value, str) and dtype is not object and not text:
        raise ConfigError(f"pad_sequences: value {value!r} is a string but dtype is {dtype!r}; expected dtype=object "
                          f"(or a string dtype) for strings")
    width = int(np.max(lengths)) if maxlen is None and lengths else (maxlen or 0)
    out = np.full((len(lengths), width) + element, value, dtype=dtype)
    for i, seq in enumerate(sequences):
        if not len(seq) or not width:
            continue
        kept = np.asarray(seq[-width:] if truncating == "pre" else seq[:width], dtype=dtype)
        if kept.shape[1:] != element:
            raise InputError(f"pad_sequences: the sequence at position {i} has elements of shape {kept.shape[1:]}, "
                             f"expected {element} (the first non-empty sequence's)")
        if padding == "pre":
            out[i, width - len(kept):] = kept
        else:
            out[i, :len(kept)] = kept
    return out
