"""Turning what users pass to fit/evaluate/predict into host batches, with clear errors."""
import numpy as np

from ..errors import InputError, describe_shape


def is_dataset(x):
    return hasattr(x, "as_numpy_iterator")


def dataset_steps(ds):
    """Batches per pass over ``ds`` if the dataset knows it (its ``cardinality()``), else None."""
    cardinality = getattr(ds, "cardinality", None)
    n = int(cardinality()) if cardinality is not None else -1
    return n if n >= 0 else None     # -1: infinite, -2: unknown


def describe_dataset(ds):
    """The shapes and dtypes of a dataset's elements, e.g. ``'((None, 8) float32, (None,) int32)'``."""
    def describe(spec):
        if isinstance(spec, (tuple, list)):
            return "(" + ", ".join(describe(s) for s in spec) + ")"
        if isinstance(spec, dict):
            return "{" + ", ".join(f"{k}: {describe(v)}" for k, v in sorted(spec.items())) + "}"
        shape, dtype = getattr(spec, "shape", None), getattr(spec, "dtype", None)
        dims = "(?)" if getattr(shape, "rank", None) is None else describe_shape(shape.as_list())
        return f"{dims} {getattr(dtype, 'name', dtype)}"
    return describe(getattr(ds, "element_spec", None))


def replay_epochs(ds, epochs):
    """Make and drop ``epochs`` iterators of ``ds``, as the epochs before a resumed one did.

    A seeded ``shuffle`` reshuffles each time an iterator is made (TF advances the shuffle's seed
    generator then), so a resumed run's dataset gives the resumed epoch its original order only after this.
    """
    for _ in range(epochs):
        ds.as_numpy_iterator()


def as_list(x, names, what):
    """x as a list of arrays, one per model input: an array, a list in input order, or a dict by input name."""
    if isinstance(x, dict):
        unknown, missing = sorted(k for k in x if k not in names), [n for n in names if n not in x]
        if unknown or missing:
            raise InputError(f"{what}: x as a dict expected the input names {names}, received "
                             f"{sorted(x)}" + (f"; unknown: {unknown}" if unknown else "")
                             + (f"; missing: {missing}" if missing else ""))
        xs = [x[n] for n in names]
    else:
        xs = list(x) if isinstance(x, (list, tuple)) else [x]
    if len(xs) != len(names):
        raise InputError(f"{what}: expected {len(names)} input array(s), one per model input {names}, received "
                         f"{len(xs)}")
    return [np.asarray(a) for a in xs]


def check_arrays(inputs, xs, what, labels=()):
    """Shapes and dtypes against the model's Inputs, equal lengths; returns the converted arrays and labels.

    ``labels``: ``(y, label_spec, where)`` for each loss, ``where`` naming it in errors."""
    out = []
    for blob, a in zip(inputs, xs):
        if a.shape[1:] != blob.shape[1:] or a.ndim != blob.ndim:
            raise InputError(f"{what}: input {blob.name!r} expected arrays of shape "
                             f"{describe_shape((None,) + blob.shape[1:])}, received {describe_shape(a.shape)}; "
                             f"reshape the data to that, or build the model's Input for the data's shape")
        out.append(_convert(a, blob.dtype, f"{what}: input {blob.name!r}"))
    n = len(out[0])
    for blob, a in zip(inputs, out):
        if len(a) != n:
            raise InputError(f"{what}: expected every input with the same number of samples, received {n} for "
                             f"{inputs[0].name!r} and {len(a)} for {blob.name!r}")
    ys = []
    for y, label_spec, where in labels:
        y = np.asarray(y)
        if len(y) != n:
            raise InputError(f"{where}: expected x and y with the same number of samples, received x with {n} and "
                             f"y with {len(y)}; pass one label per sample (slice x and y alike)")
        ys.append(check_labels(y, label_spec, where))
    return out, ys


def check_labels(y, label_spec, what):
    """Labels as the loss takes them: its dtype (class ids may come as whole floats or with a trailing axis of 1,
    as Keras accepts them) and its per-sample shape."""
    y, (shape, dtype) = np.asarray(y), label_spec
    if dtype.is_integer and y.shape[1:] == tuple(shape[1:]) + (1,):
        y = y.reshape(y.shape[:-1])
    if y.shape[1:] != tuple(shape[1:]):
        raise InputError(f"{what}: y expected shape {describe_shape((None,) + tuple(shape[1:]))} for the "
                         f"loss, received {describe_shape(y.shape)}")
    return _convert(y, dtype, f"{what}: y", integral_floats=True)


def _convert(a, dtype, what, integral_floats=False):
    """``a`` as ``dtype``; floats become integers only where asked (labels) and only when each is a whole number."""
    if dtype.is_integer and a.dtype.kind == "f":
        bad = ~np.isfinite(a) | (a != np.round(a)) if integral_floats else np.ones(a.shape, bool)
        if bad.any():
            where = np.unravel_index(np.argmax(bad), a.shape)
            raise InputError(f"{what} expected integer values ({dtype.name}), received {a.dtype}"
                             + (f" with the non-integral value {a[where].item()!r} at index {tuple(map(int, where))}; "
                                f"class ids must be whole numbers" if integral_floats else ""))
    if a.dtype.kind not in "biuf":
        raise InputError(f"{what} expected numbers, received dtype {a.dtype}")
    return a.astype(dtype.numpy, copy=False)


def batches(arrays, batch_size, order=None):
    """Yield tuples of batch slices; the last batch may be smaller."""
    n = len(arrays[0])
    if order is not None:
        arrays = [a[order] for a in arrays]
    for start in range(0, n, batch_size):
        yield tuple(a[start:start + batch_size] for a in arrays)


def num_batches(n, batch_size):
    return -(-n // batch_size)
