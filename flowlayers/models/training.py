"""The loops behind ``fit``, ``evaluate`` and ``predict``: host batches in, exact averages out."""
import itertools
import warnings

import numpy as np

from .. import callbacks as callbacks_mod, engine, losses, metrics as metrics_mod, settings
from ..contract import Rows
from ..errors import CheckpointError, InputError, describe_shape
from ..inputs import check_range, index_ranges
from . import data_adapter as da
from .running import alone


def _prepare(model, x, y, what, with_labels=True, finite=True, data=None):
    """Checked input arrays and labels: ``(xs, ys)``, ``ys`` one array per output that has a loss; None for data
    that brings its own batches (a dataset, a PyDataset, a generator).  ``finite``: NaN and infinity refused;
    ``data``: how errors name the data (default: x)."""
    model._build_from_data(x)
    model.require_built(what)
    if da.is_stream(x):
        if y is not None:
            raise InputError(f"{what}: y expected None with x a {type(x).__name__} (its elements carry the labels), "
                             f"received {type(y).__name__}; yield (x, y) from the data instead")
        return None
    xs = da.as_list(x, model.input_names, what)
    if with_labels and y is None:
        raise InputError(f"{what}: expected labels y for the loss, received None")
    xs, ys = _checked(model, xs, y, what, with_labels, finite)
    if not len(xs[0]):
        raise InputError(f"{data or f'{what}: x'} expected at least one sample, received arrays of 0 samples "
                         f"(input {model.inputs[0].name!r} of shape {describe_shape(xs[0].shape)})")
    return xs, ys


def _checked(model, xs, y, what, with_labels=True, finite=True):
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


def _converted(model, source, epoch, what, with_labels=True, finite=True):
    """Epoch ``epoch`` of an Adapter as host batches: inputs, then the labels of each output with a loss, then the
    sample weights where an element brings them (``(x, y, sample_weight)``); each element checked as it comes
    (``finite``: no NaN or infinity)."""
    if source.converted:
        yield from source.epoch(epoch)
        return
    what = f"{what}: batch of {type(source).__name__.replace('Adapter', '').lower()}"
    for item in source.epoch(epoch):
        x, y, weight = da.unpack(item, what)
        if with_labels and model.loss and y is None:
            raise InputError(f"{what}: expected elements (x, y) or (x, y, sample_weight), with labels for the loss, "
                             f"received {type(item).__name__}" + (f" of {len(item)}" if isinstance(item, tuple) else ""))
        xs, ys = _checked(model, da.as_list(x, model.input_names, what), y, what, with_labels, finite)
        weights = [] if weight is None or not with_labels else [sample_weights(ys, weight, None, what)]
        # several processes: each source gives this process's share of the batch
        yield tuple(engine.gather_processes(xs + ys + weights, what))


class FitState:
    """Where ``fit`` is: the epoch, the batches done in it and their running metric sums.

    Together with the weights, the optimizer state and the seed, this is all a
    resumed run needs to take the very same next step: the data order is
    ``rng([seed, epoch])`` (a dataset's own seeded shuffle, replayed) and
    dropout is stateless in (seed, op, step).  ``data`` describes a dataset's
    elements, so a backup is not resumed on other data.
    """

    def __init__(self, metrics, steps, batch_size, data=None):
        self.metrics, self.steps, self.batch_size, self.data = metrics, steps, batch_size, data
        self.epoch, self.batch = 0, 0
        self.resume_at, self.where = None, None

    def position(self, end_of_epoch=False):
        where = {"steps": self.steps, "batch_size": self.batch_size, "data": self.data}
        if end_of_epoch:
            return {"epoch": self.epoch + 1, "batch": 0, "metrics": [], **where}
        # each metric's sums: [name, index of the sum, its value]
        sums = [[m.name, j, float(v)] for m in self.metrics for j, v in enumerate(_sums(m))]
        return {"epoch": self.epoch, "batch": self.batch, "metrics": sums, **where}

    def resume(self, position, where):
        """Start at a saved position; it must come from a run with the same batches per epoch and data."""
        for key, what in (("steps", "batches per epoch"), ("batch_size", "batch_size"), ("data", "dataset elements")):
            saved, mine = position.get(key), getattr(self, key)
            if saved is not None and mine is not None and saved != mine:
                raise CheckpointError(f"{where}: expected a backup of a run with {what} {mine}, received one with "
                                      f"{saved}; rerun with the same data and batch_size, or delete the backup")
        self.resume_at, self.where = position, where

    def skip_done(self, batches, done):
        """The epoch's batches after the ``done`` a resumed run did already; its data must have that many."""
        batches = iter(batches)
        for seen in range(done):
            if next(batches, None) is None:
                raise CheckpointError(f"{self.where}: expected data with at least {done} batches in epoch "
                                      f"{self.epoch + 1}, where the backup was saved, received {seen}; rerun with the "
                                      f"same data and batch_size, or delete the backup")
        return batches

    def begin_epoch(self, epoch, batch, sums=()):
        self.epoch, self.batch = epoch, batch
        for m in self.metrics:
            m.reset_state()
        saved = {}
        for name, j, value in sums:
            saved.setdefault(name, {})[int(j)] = value
        for m in self.metrics:
            if m.name in saved:
                m.sums = [saved[m.name][j] for j in sorted(saved[m.name])]


def _sums(metric):
    sums = metric.sums
    return [] if sums is None else sums


def _run_batches(model, step, batches, metrics, callbacks, hook, train, state=None, deferred=False):
    """Run ``step`` on each batch (``steps_per_execution`` > 1: on groups of that many batches of one size, each
    group one call, its callbacks' batch hooks called once, as Keras does); metrics are exact running means over
    the samples seen.

    Under ``fit`` the FitState numbers the batches (from where a resumed epoch starts) and holds the metrics;
    ``deferred``: the final logs are ``metrics.Deferred`` values, read on the host only when used.
    """
    start = state.batch if state is not None else 0
    if state is None:
        for m in metrics:
            m.reset_state()
    # the logs after each batch only where a callback reads them: reading a metric waits for its step
    each_batch = callbacks.reads_logs(f"on_{hook}_batch_end")
    logs = {m.name: m.result() for m in metrics} if start else {}
    at = start
    for group in _groups(batches, model.steps_per_execution):
        getattr(callbacks, f"on_{hook}_batch_begin")(at, logs)
        # each metric's sum over the group (one per batch, stacked, for a group of several)
        sums = step.many(group) if len(group) > 1 else step(group[0])
        rows = sum(da.rows_of(b) for b in group)
        sums = iter(sums)       # each metric's own sums, in order
        for m in metrics:
            m.add_sums([next(sums) for _ in range(m.step_outputs)], rows)
        at += len(group)
        if each_batch:
            logs = {m.name: m.result() for m in metrics}
        if state is not None:
            state.batch = at
        getattr(callbacks, f"on_{hook}_batch_end")(at - 1, logs)
        if train and model.stop_training:
            break
    if at == start:     # no batch ran
        return logs
    return {m.name: m.deferred_result() if deferred else m.result() for m in metrics}


def _groups(batches, size):
    """Consecutive batches in lists of up to ``size``, a list closed early where the batch size changes (a last,
    smaller batch).  A full list is handed on before the next batch is drawn: a generator's batch is made (and
    checked) after the steps before it ran."""
    group = []
    for batch in batches:
        if group and da.rows_of(batch) != da.rows_of(group[0]):
            yield group
            group = []
        group.append(batch)
        if len(group) == size:
            yield group
            group = []
    if group:
        yield group


class _Stepper:
    """``step(batch)`` -> the step's results for ``phase``: the compiled step with or without sample weights, as
    the batch has them (a batch is inputs, labels per loss, then maybe weights), run at the optimizer's next step
    when training; ``step.many(batches)``: several in one call."""

    def __init__(self, model, phase, placement):
        self.model, self.phase, self.placement = model, phase, placement
        self.labelled = len(model.inputs) + sum(1 for h in model.trainer.heads or [None] if h is None or h.loss is not None)
        self.optimizer = model.optimizer if phase == "train" else None
        self.compiled = {}       # weighted -> the step, looked up once per call (its key walks every weight)

    def _for(self, batch):
        weighted = len(batch) > self.labelled
        if weighted not in self.compiled:
            self.compiled[weighted] = self.model.trainer.step(self.phase, weighted=weighted, placement=self.placement)
        return self.compiled[weighted]

    def __call__(self, batch):
        compiled = self._for(batch)
        sources = getattr(batch, "sources", None)
        if sources is not None and compiled.takes_rows(da.rows_of(batch), sources):
            # rows of whole training arrays, to an engine that keeps them on its devices: the step gathers its rows
            # there, and the host sends their numbers instead of the rows
            return self.many([batch])
        return compiled.run(list(batch), self.optimizer)

    def many(self, group):
        """The results of the batches of ``group`` (batches of one size), each stacked over them, run as one
        call: rows of whole training arrays as ``contract.Rows``, other batches stacked."""
        first = group[0]
        if all(getattr(b, "sources", None) is not None and b.sources is first.sources for b in group):
            start = da.run_start(group)
            index = np.stack([b.index for b in group]) if start is None else da.run_index(first.order, start, group)
            feeds = [Rows(source, index, first.order, start) for source in first.sources]
        else:
            feeds = [np.stack([b[i] for b in group]) for i in range(len(first))]
        return self._for(first).run_steps(feeds, len(group), self.optimizer)


def _metrics(model):
    """What fit and evaluate report, in Keras' order: the loss, each output's own loss (several outputs), the
    metrics."""
    heads = [metrics_mod.Mean(name=f"{h.name}_loss") for h in model.trainer.heads or () if h.loss is not None]
    return [metrics_mod.Mean(name="loss")] + heads + list(model.compiled_metrics)


def _callback_list(model, callbacks, verbose, params, history=None):
    """The callbacks of one ``fit``, ``evaluate`` or ``predict`` in Keras' order: the user's, then ``history``,
    then a progress bar where ``verbose`` asks for one and the user gave none (Keras' rule; it reads
    ``params["verbose"]``): what a user's ``on_epoch_end`` puts in ``logs`` reaches both."""
    cbs = list(callbacks or []) + ([] if history is None else [history])
    if verbose not in (0, False) and not any(type(cb).__name__ == "ProgbarLogger" for cb in cbs):
        cbs.append(callbacks_mod.ProgbarLogger())
    return callbacks_mod.CallbackList(cbs, model, params)


def fit(model, x, y, batch_size, epochs, verbose, callbacks, validation_split, validation_data, shuffle,
        initial_epoch, steps_per_epoch, sample_weight=None, class_weight=None):
    with alone(model, "fit"):
        return _fit(model, x, y, batch_size, epochs, verbose, callbacks, validation_split, validation_data, shuffle,
                    initial_epoch, steps_per_epoch, sample_weight, class_weight)


def _fit(model, x, y, batch_size, epochs, verbose, callbacks, validation_split, validation_data, shuffle,
         initial_epoch, steps_per_epoch, sample_weight, class_weight):
    what = f"Model {model.name!r}.fit"
    batch_size = _batch_size(batch_size, what)
    if not isinstance(epochs, int) or epochs < 0:
        raise InputError(f"{what}: epochs expected a non-negative int, received {epochs!r}")
    checked_steps(steps_per_epoch, what, "steps_per_epoch")
    # settings taken once: one changed during fit reaches the next fit
    placement, finite = engine.placement(), not settings.nonfinite_inputs_allowed()
    prepared = _prepare(model, x, y, what, finite=finite)
    if prepared is None:
        for name, value in (("sample_weight", sample_weight), ("class_weight", class_weight),
                            ("validation_split", validation_split or None)):
            if value is not None:
                raise InputError(f"{what}: {name} expected with arrays; with a {type(x).__name__}, received "
                                 f"{name}={value!r}: yield (x, y, sample_weight) elements, or hold data out yourself")
        source = da.adapter(x, what, shuffle=shuffle, seed=placement.seed, steps_per_epoch=steps_per_epoch)
    else:
        xs, ys = prepared
        weights = sample_weights(ys, sample_weight, class_weight, what)
        if validation_split and validation_data is None:
            if not 0.0 < validation_split < 1.0:
                raise InputError(f"{what}: validation_split expected a float in (0, 1), received {validation_split!r}")
            cut = int(len(ys[0]) * (1.0 - validation_split))
            if not cut:
                raise InputError(f"{what}: validation_split {validation_split!r} of {len(ys[0])} sample(s) expected "
                                 f"at least one sample left to train on, received none; pass more samples or a "
                                 f"smaller validation_split")
            held_out = [a[cut:] for a in ys]
            validation_data = ([a[cut:] for a in xs], held_out if model.trainer.heads else held_out[0]) + (
                () if weights is None else (weights[cut:],))
            xs, ys = [a[:cut] for a in xs], [a[:cut] for a in ys]
            weights = None if weights is None else weights[:cut]
        source = da.adapter(x, what, batch_size, shuffle, placement.seed,
                            arrays=xs + ys + ([] if weights is None else [weights]))
    validation, val_what = None, f"{what}: validation_data"
    if validation_data is not None:     # checked before the first step
        val_x, val_y, *val_weight = _split_validation(validation_data, what)
        validation = _evaluation_source(model, val_x, val_y, (val_weight or [None])[0], batch_size, None, val_what,
                                        finite, data=val_what)
    steps = source.steps
    if steps_per_epoch is not None:
        steps = min(steps, steps_per_epoch) if steps else steps_per_epoch
    model.trainer.restore_deferred()      # an optimizer state loaded before compile lands now
    history = callbacks_mod.History()
    cbs = _callback_list(model, callbacks, verbose, {"epochs": epochs, "steps": steps, "verbose": verbose}, history)
    model.history, model.stop_training = history, False
    state = model.trainer.fit_state = FitState(_metrics(model), steps, source.batch_size, source.description)
    try:
        cbs.on_train_begin({})    # BackupAndRestore restores (or refuses a backup) before the step is built
        step = _Stepper(model, "train", placement)
        resume = state.resume_at or {"epoch": initial_epoch, "batch": 0, "metrics": []}
        source.replay(resume["epoch"] - initial_epoch)
        for epoch in range(resume["epoch"], epochs):
            resumed = epoch == resume["epoch"]
            state.begin_epoch(epoch, resume["batch"] if resumed else 0, resume["metrics"] if resumed else ())
            cbs.on_epoch_begin(epoch, {})
            # the batches of this epoch a resumed run has done already are skipped, in the same order
            batches = itertools.islice(state.skip_done(_converted(model, source, epoch, what, finite=finite),
                                                       state.batch),
                                       None if steps_per_epoch is None else steps_per_epoch - state.batch)
            logs = _run_batches(model, step, batches, state.metrics, cbs, "train", train=True, state=state,
                                deferred=not cbs.reads_logs("on_epoch_end"))
            if resumed and not state.batch:
                raise _no_batch(f"{what}: x", x)
            if not logs and not resumed:
                warnings.warn(f"{what}: epoch {epoch + 1} received no batches (a generator that has ended, or "
                              f"empty data); training stops here. Pass steps_per_epoch so that each epoch draws that "
                              f"many batches, or a source that can be iterated again (a dataset, a PyDataset)")
                model.stop_training = True
            if validation is not None and not model.stop_training:
                quiet = _callback_list(model, None, 0, {"verbose": 0, "steps": None})
                val, _ = _evaluated(model, validation, None, quiet, placement, val_what, finite, val_x, data=val_what)
                logs.update({f"val_{k}": v for k, v in val.items()})
            cbs.on_epoch_end(epoch, logs)
            if model.stop_training:
                break
        cbs.on_train_end({})
    finally:
        model.trainer.fit_state = None
    return history


def _split_validation(data, what):
    """(x, y) or (x, y, sample_weight) of ``validation_data``."""
    if da.is_stream(data):
        return data, None
    if isinstance(data, (tuple, list)) and len(data) in (2, 3):
        return tuple(data)
    raise InputError(f"{what}: validation_data expected (x_val, y_val), (x_val, y_val, sample_weight_val), a "
                     f"dataset, a PyDataset or a generator, received {type(data).__name__}")


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


def checked_steps(steps, what, name="steps"):
    if steps is not None and (isinstance(steps, bool) or not isinstance(steps, int) or steps <= 0):
        raise InputError(f"{what}: {name} expected None or a positive int, received {steps!r}")
    return steps


def _batch_size(batch_size, what):
    if batch_size is None:
        return 32
    if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size <= 0:
        raise InputError(f"{what}: batch_size expected a positive int, received {batch_size!r}")
    return batch_size


def evaluate(model, x, y, sample_weight=None, batch_size=None, verbose=0, callbacks=None, return_dict=False,
             steps=None):
    with alone(model, "evaluate"):
        what = f"Model {model.name!r}.evaluate"
        batch_size = _batch_size(batch_size, what)
        placement, finite = engine.placement(), not settings.nonfinite_inputs_allowed()
        source = _evaluation_source(model, x, y, sample_weight, batch_size, steps, what, finite)
        known = source.steps if steps is None or source.steps is None else min(steps, source.steps)
        cbs = _callback_list(model, callbacks, verbose, {"verbose": verbose, "epochs": 1, "steps": known or steps})
        logs, metrics = _evaluated(model, source, steps, cbs, placement, what, finite, x)
        if return_dict:
            return logs
        values = [logs[m.name] for m in metrics]
        return values[0] if len(values) == 1 else values


def _evaluation_source(model, x, y, sample_weight, batch_size, steps, what, finite, data=None):
    """The Adapter of what ``evaluate`` (or ``fit``'s validation, ``data``) was given, its arrays checked."""
    prepared = _prepare(model, x, y, what, finite=finite, data=data)
    if prepared is None:
        if sample_weight is not None:
            raise InputError(f"{what}: sample_weight expected with arrays, received it with a {type(x).__name__}; "
                             f"yield (x, y, sample_weight) elements instead")
        return da.adapter(x, what, steps_per_epoch=steps)
    weights = sample_weights(prepared[1], sample_weight, None, what)
    return da.adapter(x, what, batch_size, arrays=prepared[0] + prepared[1] + ([] if weights is None else [weights]))


def _evaluated(model, source, steps, cbs, placement, what, finite, x, data=None):
    """``(logs, metrics)`` of one pass over ``source`` (of what the user passed as ``x``): at least one batch."""
    metrics = _metrics(model)
    cbs.on_test_begin({})
    batches = itertools.islice(_converted(model, source, 0, what, finite=finite), steps)
    logs = _run_batches(model, _Stepper(model, "eval", placement), batches, metrics, cbs, "test", train=False)
    if not logs:
        raise _no_batch(data or f"{what}: x", x)
    cbs.on_test_end(logs)
    return logs, metrics


def _no_batch(data, x):
    """The error for ``data`` (an argument, by name) whose source ``x`` gave no batch."""
    return InputError(f"{data} expected at least one batch, received a {type(x).__name__} that gave none; pass data "
                      f"with at least one sample (a generator is used up by one pass: make a new one for each call)")


def on_batch(model, x, y, return_dict, train, sample_weight=None, class_weight=None):
    """``train_on_batch`` / ``test_on_batch``: one step on the whole of ``x, y``; its metrics, reset first."""
    method = f"{'train' if train else 'test'}_on_batch"
    with alone(model, method):
        return _on_batch(model, x, y, return_dict, train, sample_weight, class_weight, f"Model {model.name!r}.{method}")


def _on_batch(model, x, y, return_dict, train, sample_weight, class_weight, what):
    if da.is_stream(x):
        raise InputError(f"{what}: expected arrays for one batch, received a {type(x).__name__}; use fit/evaluate "
                         f"for those")
    xs, ys = _prepare(model, x, y, what, finite=not settings.nonfinite_inputs_allowed())
    weights = sample_weights(ys, sample_weight, class_weight, what)
    if train:
        model.trainer.restore_deferred()
        model.stop_training = False
    metrics = _metrics(model)
    batch = tuple(xs) + tuple(ys) + (() if weights is None else (weights,))
    logs = _run_batches(model, _Stepper(model, "train" if train else "eval", engine.placement()), [batch], metrics,
                        callbacks_mod.CallbackList([], model, {}), "train" if train else "test", train=train)
    if return_dict:
        return logs
    values = [logs[m.name] for m in metrics]
    return values[0] if len(values) == 1 else values


def first_array(x):
    """The first input array of ``x`` (an array, or a list or dict of them)."""
    if isinstance(x, dict):
        x = list(x.values())
    return np.asarray(x[0] if isinstance(x, (list, tuple)) else x)


def predict(model, x, batch_size, verbose, callbacks, steps=None):
    with alone(model, "predict"):
        return _predict(model, x, batch_size, steps, f"Model {model.name!r}.predict", verbose, callbacks)


def _predict(model, x, batch_size, steps, what, verbose=0, callbacks=None):
    batch_size = _batch_size(batch_size, what)
    finite = not settings.nonfinite_inputs_allowed()
    prepared = _prepare(model, x, None, what, with_labels=False, finite=finite)
    source = da.adapter(x, what, steps_per_epoch=steps) if prepared is None else \
        da.adapter(x, what, batch_size, arrays=prepared[0])
    compiled = model.trainer.step("predict")
    inputs = len(model.inputs)
    known = source.steps if steps is None or source.steps is None else min(steps, source.steps)
    cbs = _callback_list(model, callbacks, verbose, {"verbose": verbose, "epochs": 1, "steps": known or steps})
    cbs.on_predict_begin({})
    outputs = []
    for k, batch in enumerate(itertools.islice(_converted(model, source, 0, what, with_labels=False, finite=finite),
                                               steps)):
        cbs.on_predict_batch_begin(k, {})
        outputs.append(compiled.run(list(batch[:inputs])))
        cbs.on_predict_batch_end(k, {"outputs": outputs[-1]})
    if not outputs:
        raise _no_batch(f"{what}: x", x)
    cbs.on_predict_end({})
    merged = [_join_batches([o[i] for o in outputs]) for i in range(len(model.outputs))]
    if model._output_keys:
        return dict(zip(model._output_keys, merged))
    return merged[0] if model._single_output else merged


def _join_batches(values):
    """One output's batches joined as Keras does: along the batch axis, except that a scalar per batch gives one
    value per batch, shape ``(num_batches,)`` (and a single batch its scalar itself)."""
    if np.ndim(values[0]) == 0:
        return values[0] if len(values) == 1 else np.stack(values)
    return np.concatenate(values)
