"""Turning what users pass to fit/evaluate/predict into host batches, with clear errors."""
import collections
import itertools
from concurrent import futures

import numpy as np

from ..errors import CheckpointError, ConfigError, InputError, describe_shape


class Adapter:
    """Batches for ``fit``/``evaluate``/``predict`` from one kind of data, epoch by epoch (Keras' data adapters).

    ``epoch(e)`` iterates the data of epoch ``e`` (from 0): host batches (arrays) or the source's own elements
    ``x``, ``(x,)``, ``(x, y)`` or ``(x, y, sample_weight)``, which the EpochIterator checks.  ``replay(epochs)``
    brings the source to where it was after ``epochs`` epochs, so that a resumed run takes the very same batches.
    """
    steps = None          # batches per epoch, when known
    batch_size = None     # arrays: what a resumed run must use again
    description = None    # datasets: their elements, which a resumed run must find again

    def epoch(self, epoch):
        raise NotImplementedError

    def replay(self, epochs):
        """Nothing to do where an epoch's order depends on (seed, epoch) only."""


class ArrayAdapter(Adapter):
    """Checked arrays (inputs, labels, weights) in batches of ``batch_size``; shuffled each epoch by
    ``rng([seed, epoch])``, so a resumed epoch has its original order."""

    def __init__(self, arrays, batch_size, shuffle, seed):
        self.arrays, self.batch_size, self.shuffle, self.seed = arrays, batch_size, shuffle, seed
        self.steps = num_batches(len(arrays[0]), batch_size)

    def epoch(self, epoch):
        order = epoch_order(self.seed, epoch, len(self.arrays[0])) if self.shuffle else None
        return batches(self.arrays, self.batch_size, order)


class WholeAdapter(Adapter):
    """Checked arrays as one batch, as they are (``train_on_batch``)."""
    steps = 1

    def __init__(self, arrays):
        self.arrays = arrays

    def epoch(self, epoch):
        return iter([tuple(self.arrays)])


class DatasetAdapter(Adapter):
    """A ``tf.data.Dataset`` (anything with ``as_numpy_iterator``): one pass per epoch, in its own batches."""

    def __init__(self, dataset):
        self.dataset, self.description = dataset, describe_dataset(dataset)
        self.steps = dataset_steps(dataset)

    def epoch(self, epoch):
        return self.dataset.as_numpy_iterator()

    def replay(self, epochs):
        """Make and drop ``epochs`` iterators, as the epochs before a resumed one did: a seeded ``shuffle``
        reshuffles each time an iterator is made (TF advances the shuffle's seed generator then)."""
        for _ in range(epochs):
            self.dataset.as_numpy_iterator()


class SequenceAdapter(Adapter):
    """An indexable of batches (``len`` and ``[i]``: ``keras.utils.PyDataset`` or ``flow.utils.PyDataset``, a list
    of batches); with ``shuffle`` the batch order of each epoch is ``rng([seed, epoch])``'s.  Its ``on_epoch_begin``
    and ``on_epoch_end`` are called around each epoch, as Keras does; a PyDataset's ``workers`` > 1 makes up to
    ``max_queue_size`` batches ahead in that many threads, in order (``use_multiprocessing`` is refused by name)."""

    def __init__(self, sequence, shuffle, seed):
        self.sequence, self.shuffle, self.seed = sequence, shuffle, seed
        self.steps = len(sequence)
        self.workers, self.queue = getattr(sequence, "workers", 1), getattr(sequence, "max_queue_size", 10)
        if getattr(sequence, "use_multiprocessing", False):
            raise ConfigError(f"{type(sequence).__name__}: use_multiprocessing=True is not supported (batches are "
                              f"made in threads); expected use_multiprocessing=False, with workers > 1 for threads")

    def epoch(self, epoch):
        order = [int(i) for i in (epoch_order(self.seed, epoch, self.steps) if self.shuffle else range(self.steps))]
        if callable(getattr(self.sequence, "on_epoch_begin", None)):
            self.sequence.on_epoch_begin()
        yield from made_ahead(self.sequence.__getitem__, order, self.workers, self.queue)
        if callable(getattr(self.sequence, "on_epoch_end", None)):
            self.sequence.on_epoch_end()


def made_ahead(make, order, workers, queue):
    """``make(i)`` for each ``i`` of ``order``, in that order; with ``workers`` > 1, up to ``queue`` of them made
    ahead in that many threads."""
    if workers <= 1:
        yield from (make(i) for i in order)
        return
    with futures.ThreadPoolExecutor(workers) as pool:
        pending = collections.deque()
        for i in order:
            pending.append(pool.submit(make, i))
            if len(pending) >= queue:
                yield pending.popleft().result()
        while pending:
            yield pending.popleft().result()


class GeneratorAdapter(Adapter):
    """A Python iterator (a generator) of batches, drawn from across epochs as Keras does: ``steps_per_epoch``
    batches each epoch, or, without it, until it ends (then a later epoch finds it empty)."""

    def __init__(self, iterator, steps_per_epoch, what):
        self.iterator, self.steps, self.what = iterator, steps_per_epoch, what

    def epoch(self, epoch):
        for _ in range(self.steps) if self.steps is not None else itertools.count():
            item = next(self.iterator, _END)
            if item is _END:
                return
            yield item

    def replay(self, epochs):
        """Draw and drop the batches of ``epochs`` epochs: a fresh generator of the same data then continues where
        the interrupted run was."""
        if epochs and self.steps is None:
            raise CheckpointError(f"{self.what}: resuming on a generator expected steps_per_epoch (how many batches "
                                  f"the epochs before the resumed one drew), received None; pass steps_per_epoch")
        for _ in range(epochs * (self.steps or 0)):
            if next(self.iterator, _END) is _END:
                raise CheckpointError(f"{self.what}: resuming expected a generator with the {epochs} epoch(s) of "
                                      f"{self.steps} batches drawn before, received one that ended sooner")


_END = object()


def epoch_order(seed, epoch, n):
    """The shuffled order of ``n`` samples (or batches) in epoch ``epoch``: ``rng([seed, epoch])``'s, the same
    when a run resumes there."""
    return np.random.default_rng([seed, epoch]).permutation(n)


def adapter(x, what, batch_size=None, shuffle=False, seed=0, steps_per_epoch=None, arrays=None):
    """The Adapter for what the user passed as ``x``: ``arrays`` (checked already), a dataset, an indexable of
    batches or an iterator."""
    if arrays is not None:
        return ArrayAdapter(arrays, batch_size, shuffle, seed)
    if is_dataset(x):
        return DatasetAdapter(x)
    if is_sequence(x):
        return SequenceAdapter(x, shuffle, seed)
    if is_iterator(x):
        return GeneratorAdapter(x, steps_per_epoch, what)
    raise InputError(f"{what}: x expected arrays, a tf.data.Dataset, a keras.utils.PyDataset or a generator of "
                     f"batches, received {type(x).__name__}")


def is_dataset(x):
    return hasattr(x, "as_numpy_iterator")


def is_sequence(x):
    """An indexable of batches (not an array, nor a list of input arrays): a PyDataset or Keras Sequence."""
    return hasattr(x, "__getitem__") and hasattr(x, "__len__") and not isinstance(x, (np.ndarray, list, tuple, dict))


def is_iterator(x):
    return hasattr(x, "__next__") and hasattr(x, "__iter__")


def is_stream(x):
    """Whether ``x`` brings its own batches (and labels): a dataset, an indexable of batches or an iterator."""
    return is_dataset(x) or is_sequence(x) or is_iterator(x)


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


def unpack(item, what):
    """A source's element -> ``(x, y, sample_weight)``, as Keras reads them: ``x``, ``(x,)``, ``(x, y)`` or
    ``(x, y, sample_weight)``."""
    if not isinstance(item, tuple):
        return item, None, None
    if not 1 <= len(item) <= 3:
        raise InputError(f"{what}: expected elements x, (x,), (x, y) or (x, y, sample_weight), received a tuple of "
                         f"{len(item)}")
    return tuple(item) + (None,) * (3 - len(item))


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


def check_arrays(inputs, xs, what, labels=(), finite=True):
    """Shapes and dtypes against the model's Inputs, equal lengths; returns the converted arrays and labels.

    ``labels``: ``(y, label_spec, where)`` for each loss, ``where`` naming it in errors; ``finite``: NaN and
    infinity refused in float inputs and labels (``flow.config.allow_nonfinite_inputs``)."""
    out = []
    for blob, a in zip(inputs, xs):
        if a.ndim != blob.ndim or any(d is not None and d != n for d, n in zip(blob.shape[1:], a.shape[1:])):
            raise InputError(f"{what}: input {blob.name!r} expected arrays of shape "
                             f"{describe_shape((None,) + blob.shape[1:])}, received {describe_shape(a.shape)}; "
                             f"reshape the data to that, or build the model's Input for the data's shape")
        out.append(_convert(a, blob.dtype, f"{what}: input {blob.name!r}"))
        if finite and blob.dtype.is_floating:
            check_finite(out[-1], f"{what}: input {blob.name!r}")
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
        ys.append(check_labels(y, label_spec, where, finite))
    return out, ys


def check_labels(y, label_spec, what, finite=True):
    """Labels as the loss takes them: its dtype (class ids may come as whole floats) and its per-sample shape, a
    trailing axis of 1 dropped or added where only that differs (Keras' squeeze_or_expand_to_same_rank: labels of
    shape (n,) for outputs of shape (None, 1)); float labels finite where ``finite``."""
    y, (shape, dtype) = np.asarray(y), label_spec
    if y.shape[1:] == tuple(shape[1:]) + (1,):
        y = y.reshape(y.shape[:-1])
    elif y.shape[1:] + (1,) == tuple(shape[1:]):
        y = y.reshape(y.shape + (1,))
    if y.shape[1:] != tuple(shape[1:]):
        raise InputError(f"{what}: y expected shape {describe_shape((None,) + tuple(shape[1:]))} for the "
                         f"loss, received {describe_shape(y.shape)}")
    y = _convert(y, dtype, f"{what}: y", integral_floats=True)
    if finite and dtype.is_floating:
        check_finite(y, f"{what}: y")
    return y


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


CHUNK = 1 << 18     # values looked at at once by check_finite: a bounded temporary, summed in the cache


def check_finite(a, what):
    """Refuse NaN and infinity in the float array ``a`` (samples along dim 0), naming ``what``, how many and the
    first one's index.

    A block of samples is finite when its sum is (a sum propagates NaN and infinity); a sum that overflowed from
    finite values is told apart by looking at each value.  One pass over ``a``, with a temporary of one block at
    most and no copy of ``a`` (a strided view is summed where it lies)."""
    wide = np.float32 if a.dtype.itemsize < 4 else None     # float16 and bfloat16 summed without overflowing
    rows = max(1, CHUNK // max(1, a.size // max(1, len(a))))
    with np.errstate(over="ignore", invalid="ignore"):
        for start in range(0, len(a), rows):
            block = a[start:start + rows]
            if not np.isfinite(block.sum(dtype=wide)) and not np.isfinite(block).all():
                _refuse_nonfinite(a, start, rows, what)


def _refuse_nonfinite(a, first_block, rows, what):
    """The error for ``a``, whose first value that is not finite lies in the block of ``rows`` samples from
    ``first_block``."""
    first = np.argwhere(~np.isfinite(a[first_block:first_block + rows]))[0]
    where = (first_block + int(first[0]),) + tuple(int(i) for i in first[1:])
    nans = infinite = 0
    for start in range(first_block, len(a), rows):
        block = a[start:start + rows]
        nans += int(np.count_nonzero(np.isnan(block)))
        infinite += int(np.count_nonzero(np.isinf(block)))
    kinds = " and ".join(f"{n} {kind}" for n, kind in ((nans, "NaN"), (infinite, "infinite")) if n)
    raise InputError(f"{what} expected finite numbers, received {kinds} value(s) among {a.size}, the first at index "
                     f"{where}; replace them (np.nan_to_num) or leave those samples out, or, for a model that "
                     f"handles them itself, call flow.config.allow_nonfinite_inputs(True)")


class Batch:
    """A batch of rows of whole arrays, a sequence of their row blocks taken when first read, and ``sources``
    (the whole arrays), ``order`` (the epoch's, None: the rows in their order), ``start`` and ``rows`` (the rows
    taken: ``index``), so that an engine may take the rows on its devices (``contract.Rows``): the host then
    copies no rows at all."""

    def __init__(self, sources, order, start, rows):
        self.sources, self.order, self.start, self.rows = sources, order, start, rows
        self._values = None

    @property
    def index(self):
        return _taken(self.order, self.start, self.rows)

    def values(self):
        if self._values is None:
            end = self.start + self.rows
            self._values = tuple(a[self.start:end] if self.order is None else a[self.order[self.start:end]]
                                 for a in self.sources)
        return self._values

    def __len__(self):
        return len(self.sources)

    def __getitem__(self, i):
        return self.values()[i]

    def __iter__(self):
        return iter(self.values())


def rows_of(batch):
    """The rows of a batch (a Batch counts them without taking them)."""
    return batch.rows if isinstance(batch, Batch) else len(batch[0])


def run_start(batches):
    """The first row of Batches that follow each other in one order (``contract.Rows.start``), else None."""
    first = batches[0]
    at = first.start
    for b in batches:
        if b.order is not first.order or b.start != at:
            return None
        at += b.rows
    return first.start


def run_index(order, start, batches):
    """The rows of Batches of one size that follow each other from row ``start`` of ``order``, (batches, rows)."""
    steps, rows = len(batches), batches[0].rows
    return _taken(order, start, steps * rows).reshape(steps, rows)


def _taken(order, start, count):
    """Rows ``start`` to ``start + count`` of ``order`` (None: the rows in their order)."""
    return np.arange(start, start + count) if order is None else order[start:start + count]


def batches(arrays, batch_size, order=None):
    """Yield Batches of the rows of ``arrays`` (in ``order`` when shuffled); the last batch may be smaller."""
    n = len(arrays[0])
    for start in range(0, n, batch_size):
        yield Batch(arrays, order, start, min(batch_size, n - start))


def num_batches(n, batch_size):
    return -(-n // batch_size)
