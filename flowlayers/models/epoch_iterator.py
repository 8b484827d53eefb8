"""One data path for ``fit``, ``evaluate``, ``predict`` and ``*_on_batch`` (Keras 3's ``EpochIterator``).

What the user passed (arrays, a dataset, a PyDataset, a generator) becomes, epoch by epoch, host batches checked
against the model (shapes, dtypes, label ranges, finite values), weighted (``sample_weight``, ``class_weight``),
shuffled in the order ``epoch_order(seed, epoch, n)`` gives, cut to ``steps_per_epoch``, resumed after the batches a
backup did already, and grouped into what one engine call takes (``steps_per_execution``): a ``Group`` hands the
engine a batch's arrays, the batches stacked, or ``contract.Rows`` of the whole training arrays.
"""
import functools
import itertools

import numpy as np

from .. import engine, losses
from ..contract import Rows
from ..errors import CheckpointError, InputError, describe_shape
from ..inputs import check_range, index_ranges
from . import data_adapter as da


class EpochIterator:
    """The batches of one source, epoch by epoch: ``adapter``'s items through ``convert`` (None: they are host
    batches already), at most ``steps_per_epoch`` of them an epoch.  ``x`` and ``data`` name the source in the
    error for data that gave no batch; ``validation_data`` is what ``fit`` validates on (given, or held out)."""

    def __init__(self, adapter, convert=None, steps_per_epoch=None, x=None, data=None):
        self.adapter, self._convert, self.limit = adapter, convert, steps_per_epoch
        self.x, self.data, self.validation_data = x, data, None
        known = adapter.steps
        # batches per epoch where known: steps_per_epoch caps what the data has
        self.steps = known if steps_per_epoch is None else (min(known, steps_per_epoch) if known else steps_per_epoch)

    @property
    def batches_per_pass(self):
        """Batches in one pass over the data, where known (not capped by ``steps_per_epoch``)."""
        return self.adapter.steps

    @property
    def batch_size(self):
        """Arrays' batch size (a resumed run must use it again), else None."""
        return self.adapter.batch_size

    @property
    def description(self):
        """A dataset's elements (a resumed run must find them again), else None."""
        return self.adapter.description

    def replay(self, epochs):
        """Bring the source to where it was after ``epochs`` epochs, so that a resumed run takes the same batches."""
        self.adapter.replay(epochs)

    def batches(self, epoch, skip=0, where=None, skipped=None):
        """The host batches of epoch ``epoch`` (from 0) after the first ``skip``, which a resumed run (its backup:
        ``where``) did already; those are drawn and dropped now (each handed to ``skipped([batch])`` first), and
        the data must have them."""
        items = self.adapter.epoch(epoch)
        batches = iter(items if self._convert is None else map(self._convert, items))
        for seen in range(skip):
            batch = next(batches, None)
            if batch is None:
                raise CheckpointError(f"{where}: expected data with at least {skip} batches in epoch {epoch + 1}, "
                                      f"where the backup was saved, received {seen}; rerun with the same data and "
                                      f"batch_size, or delete the backup")
            if skipped is not None:
                skipped([batch])
        return itertools.islice(batches, None if self.limit is None else self.limit - skip)

    def groups(self, epoch, size, skip=0, where=None, skipped=None):
        """The batches of ``batches(epoch, skip, where, skipped)`` as Groups of up to ``size``."""
        return _groups(self.batches(epoch, skip, where, skipped), size)

    def no_batch(self):
        """The error for a source that gave no batch."""
        return InputError(f"{self.data} expected at least one batch, received a {type(self.x).__name__} that gave "
                          f"none; pass data with at least one sample (a generator is used up by one pass: make a new "
                          f"one for each call)")

    @classmethod
    def for_model(cls, model, x, y, what, kind, batch_size=None, *, sample_weight=None, class_weight=None,
                  validation_split=0.0, validation_data=None, shuffle=False, seed=0, steps_per_epoch=None,
                  finite=True, data=None):
        """The epochs of ``x, y`` for ``model``'s ``kind`` of call: ``"fit"``, ``"evaluate"``, ``"predict"`` or
        ``"on_batch"`` (all of ``x`` as one batch).  ``finite``: NaN and infinity refused; ``data``: how errors
        name the data (default: x); ``validation_split`` holds the last samples of arrays out where no
        ``validation_data`` is given."""
        if kind == "on_batch" and da.is_stream(x):
            raise InputError(f"{what}: expected arrays for one batch, received a {type(x).__name__}; use "
                             f"fit/evaluate for those")
        model._build_from_data(x)
        model.require_built(what)
        with_labels = kind != "predict"
        if da.is_stream(x):
            if y is not None:
                raise InputError(f"{what}: y expected None with x a {type(x).__name__} (its elements carry the "
                                 f"labels), received {type(y).__name__}; yield (x, y) from the data instead")
            _refuse_with_stream(x, what, kind, sample_weight, class_weight, validation_split)
            adapter = da.adapter(x, what, shuffle=shuffle, seed=seed, steps_per_epoch=steps_per_epoch)
            convert = functools.partial(_checked_element, model, f"{what}: batch of {_kind_of(adapter)}",
                                        with_labels, finite)
            it = cls(adapter, convert, steps_per_epoch, x, data or f"{what}: x")
            it.validation_data = validation_data
            return it
        xs = da.as_list(x, model.input_names, what)
        if with_labels and y is None:
            raise InputError(f"{what}: expected labels y for the loss, received None")
        xs, ys = _checked(model, xs, y, what, with_labels, finite)
        if not len(xs[0]):
            raise InputError(f"{data or f'{what}: x'} expected at least one sample, received arrays of 0 samples "
                             f"(input {model.inputs[0].name!r} of shape {describe_shape(xs[0].shape)})")
        weights = sample_weights(ys, sample_weight, class_weight, what) if with_labels else None
        if validation_split and validation_data is None:
            xs, ys, weights, validation_data = _held_out(model, xs, ys, weights, validation_split, what)
        arrays = xs + ys + ([] if weights is None else [weights])
        adapter = da.WholeAdapter(arrays) if kind == "on_batch" else \
            da.adapter(x, what, batch_size, shuffle, seed, arrays=arrays)
        it = cls(adapter, None, steps_per_epoch, x, data or f"{what}: x")
        it.validation_data = validation_data
        return it

    def validation(self, model, what, batch_size, finite):
        """The EpochIterator of ``fit``'s validation data (checked before the first step), or None."""
        if self.validation_data is None:
            return None
        where = f"{what}: validation_data"
        val_x, val_y, *val_weight = split_validation(self.validation_data, what)
        return EpochIterator.for_model(model, val_x, val_y, where, "evaluate", batch_size,
                                       sample_weight=(val_weight or [None])[0], finite=finite, data=where)


def _kind_of(adapter):
    return type(adapter).__name__.replace("Adapter", "").lower()


def _refuse_with_stream(x, what, kind, sample_weight, class_weight, validation_split):
    """Arguments that only arrays take, refused by name with a source that brings its own batches."""
    if kind == "fit":
        for name, value in (("sample_weight", sample_weight), ("class_weight", class_weight),
                            ("validation_split", validation_split or None)):
            if value is not None:
                raise InputError(f"{what}: {name} expected with arrays; with a {type(x).__name__}, received "
                                 f"{name}={value!r}: yield (x, y, sample_weight) elements, or hold data out yourself")
    elif sample_weight is not None:
        raise InputError(f"{what}: sample_weight expected with arrays, received it with a {type(x).__name__}; "
                         f"yield (x, y, sample_weight) elements instead")


def _held_out(model, xs, ys, weights, validation_split, what):
    """``(xs, ys, weights, validation_data)``: the last ``validation_split`` of the samples held out, as Keras
    does (unshuffled)."""
    if not 0.0 < validation_split < 1.0:
        raise InputError(f"{what}: validation_split expected a float in (0, 1), received {validation_split!r}")
    cut = int(len(ys[0]) * (1.0 - validation_split))
    if not cut:
        raise InputError(f"{what}: validation_split {validation_split!r} of {len(ys[0])} sample(s) expected at "
                         f"least one sample left to train on, received none; pass more samples or a smaller "
                         f"validation_split")
    held = [a[cut:] for a in ys]
    validation = ([a[cut:] for a in xs], held if model.trainer.heads else held[0]) + (
        () if weights is None else (weights[cut:],))
    return [a[:cut] for a in xs], [a[:cut] for a in ys], None if weights is None else weights[:cut], validation


def split_validation(data, what):
    """(x, y) or (x, y, sample_weight) of ``validation_data``."""
    if da.is_stream(data):
        return data, None
    if isinstance(data, (tuple, list)) and len(data) in (2, 3):
        return tuple(data)
    raise InputError(f"{what}: validation_data expected (x_val, y_val), (x_val, y_val, sample_weight_val), a "
                     f"dataset, a PyDataset or a generator, received {type(data).__name__}")


# Checks --------------------------------------------------------------------------------------------------------
def _checked(model, xs, y, what, with_labels=True, finite=True):
    """Inputs ``xs`` and labels ``y`` checked and converted for ``model``: ``(xs, ys)``, ``ys`` one array per
    output that has a loss."""
    heads = _heads_and_labels(model, y, what) if with_labels and model.loss else []
    xs, ys = da.check_arrays(model.inputs, xs, what, [
        (label, loss.label_spec(out), what if model.trainer.heads is None else f"{what}: output {name!r}")
        for name, out, loss, label in heads], finite)
    for (_, out, loss, _), checked in zip(heads, ys):
        _check_label_range(out, loss, checked, what)
    for i, node, size, kind in index_ranges(model._nodes, model.inputs):   # e.g. Embedding ids
        check_range(xs[i], node, size, kind, f"{what}: input {model.inputs[i].name!r}")
    return xs, ys


def _heads_and_labels(model, y, what):
    """(output name, output Blob, loss, its labels) for each output with a loss; ``y`` one array, or a list / dict
    of them."""
    if model.trainer.heads is None:
        return [(model.output_names[0], model.outputs[0], model.loss, y)]
    names = model.output_names
    if isinstance(y, dict):
        unknown = sorted(k for k in y if k not in names)
        if unknown:
            raise InputError(f"{what}: y names outputs {unknown}, expected among the output names {names}")
        labels = [y.get(n) for n in names]
    elif isinstance(y, (list, tuple)) and len(y) == len(names):
        labels = list(y)
    else:
        raise InputError(f"{what}: y expected a list of {len(names)} label arrays, one per output {names}, or a "
                         f"dict by output name, received {type(y).__name__}"
                         + (f" of {len(y)}" if isinstance(y, (list, tuple)) else ""))
    out = []
    for h, label in zip(model.trainer.heads, labels):
        if h.loss is None:
            continue
        if label is None:
            raise InputError(f"{what}: y expected labels for output {h.name!r} (it has a loss), received none")
        out.append((h.name, model.outputs[h.index], h.loss, label))
    return out


def _check_label_range(out, loss, y, what):
    if isinstance(loss, losses.SparseCategoricalCrossentropy) and y.size:
        classes = out.shape[-1]
        lo, hi = int(y.min()), int(y.max())
        if lo < 0 or hi >= classes:
            raise InputError(f"{what}: loss {loss.name!r} expected labels in [0, {classes}) for "
                             f"{classes} classes, received labels in [{lo}, {hi}]; remap the labels into "
                             f"[0, {classes}), or give the output layer one unit per class")


def _checked_element(model, what, with_labels, finite, item):
    """A source's element as a host batch: inputs, then the labels of each output with a loss, then the sample
    weights where the element brings them (``(x, y, sample_weight)``), checked (``finite``: no NaN or infinity)."""
    x, y, weight = da.unpack(item, what)
    if with_labels and model.loss and y is None:
        raise InputError(f"{what}: expected elements (x, y) or (x, y, sample_weight), with labels for the loss, "
                         f"received {type(item).__name__}" + (f" of {len(item)}" if isinstance(item, tuple) else ""))
    xs, ys = _checked(model, da.as_list(x, model.input_names, what), y, what, with_labels, finite)
    weights = [] if weight is None or not with_labels else [sample_weights(ys, weight, None, what)]
    # several processes: each source gives this process's share of the batch
    return tuple(engine.gather_processes(xs + ys + weights, what))


def sample_weights(ys, sample_weight, class_weight, what):
    """One float32 weight per sample, from ``sample_weight`` or from the labels (``ys``, one array per output)
    through ``class_weight`` (Keras: a class it does not list weighs 1), or None for neither."""
    y = ys[0]
    if class_weight is not None and len(ys) > 1:
        raise InputError(f"{what}: class_weight expected with a model of one output, received a model with "
                         f"{len(ys)} outputs with losses; pass sample_weight instead")
    if sample_weight is not None and class_weight is not None:
        raise InputError(f"{what}: expected sample_weight or class_weight, received both; fold the class weights "
                         f"into the sample weights")
    if class_weight is not None:
        if not isinstance(class_weight, dict) or not all(
                isinstance(k, (int, np.integer)) and not isinstance(k, bool) and isinstance(v, (int, float))
                and not isinstance(v, bool) for k, v in class_weight.items()):
            raise InputError(f"{what}: class_weight expected a dict class id -> weight, received {class_weight!r}")
        ids = y if y.ndim == 1 else (np.argmax(y, axis=-1) if y.shape[-1] > 1 else y[..., 0])
        if ids.ndim != 1:
            raise InputError(f"{what}: class_weight expected one class per sample, received labels of shape "
                             f"{y.shape}")
        return np.array([class_weight.get(int(c), 1.0) for c in np.round(ids)], np.float32)
    if sample_weight is None:
        return None
    w = np.asarray(sample_weight)
    if w.ndim == 2 and w.shape[1] == 1:
        w = w[:, 0]
    if w.dtype.kind not in "biuf" or w.shape != (len(y),) or not np.isfinite(w).all():
        raise InputError(f"{what}: sample_weight expected {len(y)} finite numbers, one per sample (shape "
                         f"({len(y)},)), received {w.dtype} of shape {w.shape}")
    return w.astype(np.float32)


# What one engine call takes --------------------------------------------------------------------------------------
class Group:
    """Consecutive host batches of one size that run as one engine call (``steps_per_execution``); each batch
    is the arrays of one step: inputs, labels per loss, then maybe sample weights."""

    def __init__(self, batches):
        self.batches = batches

    def __len__(self):
        return len(self.batches)

    @property
    def samples(self):
        return sum(da.rows_of(b) for b in self.batches)

    @property
    def width(self):
        """Arrays per batch."""
        return len(self.batches[0])

    @property
    def batch_rows(self):
        return da.rows_of(self.batches[0])

    @property
    def sources(self):
        """The whole arrays every batch takes its rows of (an engine may keep them on its devices), else None."""
        first = getattr(self.batches[0], "sources", None)
        if first is None or any(getattr(b, "sources", None) is not first for b in self.batches):
            return None
        return first

    def arrays(self):
        """The arrays of a group of one batch."""
        return list(self.batches[0])

    def feeds(self):
        """Per input of the step, its feed over the group's batches: ``contract.Rows`` of the whole arrays where
        the batches take rows of them (their numbers only, made from the epoch's order where the batches follow
        each other in it), else the batches' arrays stacked."""
        sources, first = self.sources, self.batches[0]
        if sources is None:
            return [np.stack([b[i] for b in self.batches]) for i in range(len(first))]
        start = da.run_start(self.batches)
        index = np.stack([b.index for b in self.batches]) if start is None else \
            da.run_index(first.order, start, self.batches)
        return [Rows(source, index, first.order, start) for source in sources]


def _groups(batches, size):
    """Consecutive batches in Groups of up to ``size``, a Group closed early where the batch size changes (a last,
    smaller batch).  A full Group is handed on before the next batch is drawn: a generator's batch is made (and
    checked) after the steps before it ran."""
    group = []
    for batch in batches:
        if group and da.rows_of(batch) != da.rows_of(group[0]):
            yield Group(group)
            group = []
        group.append(batch)
        if len(group) == size:
            yield Group(group)
            group = []
    if group:
        yield Group(group)
