"""The loops behind ``fit``, ``evaluate`` and ``predict``: host batches in, exact averages out."""
import itertools

import numpy as np

from .. import callbacks as callbacks_mod, config, losses, metrics as metrics_mod
from ..errors import CheckpointError, InputError
from ..inputs import check_range, index_ranges
from . import data_adapter as da


def _prepare(model, x, y, what, with_labels=True):
    """Checked input arrays and labels: ``(xs, ys)``, ``ys`` one array per output that has a loss; None for a
    dataset."""
    model._build_from_data(x)
    model._require_built(what)
    if da.is_dataset(x):
        return None
    xs = da.as_list(x, model.input_names, what)
    if with_labels and y is None:
        raise InputError(f"{what}: expected labels y for the loss, received None")
    heads = _heads_and_labels(model, y, what) if with_labels and model.loss else []
    xs, ys = da.check_arrays(model.inputs, xs, what, [
        (label, loss.label_spec(out), what if model._heads is None else f"{what}: output {name!r}")
        for name, out, loss, label in heads])
    for (_, out, loss, _), checked in zip(heads, ys):
        _check_label_range(out, loss, checked, what)
    for i, node, size, kind in index_ranges(model._nodes, model.inputs):   # e.g. Embedding ids
        check_range(xs[i], node, size, kind, f"{what}: input {model.inputs[i].name!r}")
    return xs, ys


def _heads_and_labels(model, y, what):
    """(output name, output Blob, loss, its labels) for each output with a loss; ``y`` one array, or a list / dict
    of them."""
    if model._heads is None:
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
    for h, label in zip(model._heads, labels):
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


def _dataset_batches(ds, model):
    """A dataset's elements ``(x, y)`` as host batches: the inputs, then the labels of each output with a loss."""
    for item in ds.as_numpy_iterator():
        if not isinstance(item, tuple) or len(item) < 2:
            raise InputError("dataset: expected elements (x, y), received " + type(item).__name__)
        x, y = item[0], item[1]
        labels = [da.check_labels(label, loss.label_spec(out), f"dataset: output {name!r}")
                  for name, out, loss, label in _heads_and_labels(model, y, "dataset")]
        yield tuple(list(x) if isinstance(x, (list, tuple)) else [x]) + tuple(labels)


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
        return {"epoch": self.epoch, "batch": self.batch, "metrics": [[m.name, m.total, m.count] for m in self.metrics],
                **where}

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
        saved = {name: (total, count) for name, total, count in sums}
        for m in self.metrics:
            if m.name in saved:
                m.total, m.count = saved[m.name]


def _run_batches(model, executable, batches, metrics, callbacks, hook, train, state=None):
    """Run ``executable`` on each batch; metrics are exact running means over samples seen.

    Under ``fit`` the FitState numbers the batches (from where a resumed epoch starts) and holds the metrics.
    """
    start = state.batch if state is not None else 0
    if state is None:
        for m in metrics:
            m.reset_state()
    logs = {m.name: m.result() for m in metrics} if start else {}
    for i, batch in enumerate(batches, start):
        getattr(callbacks, f"on_{hook}_batch_begin")(i, logs)
        opt = model.optimizer
        kwargs = {"lr": opt.current_learning_rate(), "step": opt.iterations + 1} if train else {}
        sums = executable(list(batch), **kwargs)
        if train:
            opt.iterations += 1
        n = len(batch[-1])
        for m, total in zip(metrics, sums):
            m.update(total, n)
        logs = {m.name: m.result() for m in metrics}
        if state is not None:
            state.batch = i + 1
        getattr(callbacks, f"on_{hook}_batch_end")(i, logs)
        if train and model.stop_training:
            break
    return logs


def _metrics(model):
    """What fit and evaluate report, in Keras' order: the loss, each output's own loss (several outputs), the
    metrics."""
    heads = [metrics_mod.Mean(name=f"{h.name}_loss") for h in model._heads or () if h.loss is not None]
    return [metrics_mod.Mean(name="loss")] + heads + list(model.compiled_metrics)


def _callback_list(model, callbacks, verbose, params, history=None):
    cbs = list(callbacks or [])
    if verbose not in (0, False):
        cbs.append(callbacks_mod.ProgbarLogger(verbose=1 if verbose == "auto" else verbose))
    if history is not None:
        cbs.insert(0, history)
    return callbacks_mod.CallbackList(cbs, model, params)


def fit(model, x, y, batch_size, epochs, verbose, callbacks, validation_split, validation_data, shuffle,
        initial_epoch, steps_per_epoch, sample_weight=None, class_weight=None):
    what = f"Model {model.name!r}.fit"
    batch_size = _batch_size(batch_size, what)
    if not isinstance(epochs, int) or epochs < 0:
        raise InputError(f"{what}: epochs expected a non-negative int, received {epochs!r}")
    prepared = _prepare(model, x, y, what)
    weights = None
    if prepared is None and (sample_weight is not None or class_weight is not None):
        raise InputError(f"{what}: sample_weight / class_weight expected with arrays; with a dataset, received "
                         f"them as arguments: weight the dataset's loss another way, or pass arrays")
    if prepared is not None:
        xs, ys = prepared
        weights = sample_weights(ys, sample_weight, class_weight, what)
        if validation_split and validation_data is None:
            if not 0.0 < validation_split < 1.0:
                raise InputError(f"{what}: validation_split expected a float in (0, 1), received {validation_split!r}")
            cut = int(len(ys[0]) * (1.0 - validation_split))
            held_out = [a[cut:] for a in ys]
            validation_data = ([a[cut:] for a in xs], held_out if model._heads else held_out[0]) + (
                () if weights is None else (weights[cut:],))
            xs, ys = [a[:cut] for a in xs], [a[:cut] for a in ys]
            weights = None if weights is None else weights[:cut]
        steps = da.num_batches(len(ys[0]), batch_size)
    else:
        steps = da.dataset_steps(x)
    if steps_per_epoch is not None:
        steps = min(steps, steps_per_epoch) if steps else steps_per_epoch
    model._optimizers()       # an optimizer state loaded before compile lands now
    history = callbacks_mod.History()
    cbs = _callback_list(model, callbacks, verbose, {"epochs": epochs, "steps": steps, "verbose": verbose}, history)
    model.history, model.stop_training = history, False
    state = model._fit_state = FitState(_metrics(model), steps, batch_size if prepared else None,
                                        None if prepared else da.describe_dataset(x))
    try:
        cbs.on_train_begin({})    # BackupAndRestore restores (or refuses a backup) before the step is built
        executable = model._executable("train", weighted=weights is not None)
        resume = state.resume_at or {"epoch": initial_epoch, "batch": 0, "metrics": []}
        if prepared is None and state.resume_at:
            da.replay_epochs(x, resume["epoch"] - initial_epoch)
        for epoch in range(resume["epoch"], epochs):
            resumed = epoch == resume["epoch"]
            state.begin_epoch(epoch, resume["batch"] if resumed else 0, resume["metrics"] if resumed else ())
            cbs.on_epoch_begin(epoch, {})
            if prepared is None:
                batches = _dataset_batches(x, model)
            else:
                order = np.random.default_rng([config.seed(), epoch]).permutation(len(ys[0])) if shuffle else None
                batches = da.batches(xs + ys + ([] if weights is None else [weights]), batch_size, order)
            # the batches of this epoch a resumed run has done already are skipped, in the same order
            batches = itertools.islice(state.skip_done(batches, state.batch),
                                       None if steps_per_epoch is None else steps_per_epoch - state.batch)
            logs = _run_batches(model, executable, batches, state.metrics, cbs, "train", train=True, state=state)
            if validation_data is not None:
                val = evaluate(model, *_split_validation(validation_data, what), batch_size=batch_size, verbose=0,
                               callbacks=None, return_dict=True)
                logs.update({f"val_{k}": v for k, v in val.items()})
            cbs.on_epoch_end(epoch, logs)
            if model.stop_training:
                break
        cbs.on_train_end({})
    finally:
        model._fit_state = None
    return history


def _split_validation(data, what):
    """(x, y) or (x, y, sample_weight) of ``validation_data``."""
    if da.is_dataset(data):
        return data, None
    if isinstance(data, (tuple, list)) and len(data) in (2, 3):
        return tuple(data)
    raise InputError(f"{what}: validation_data expected (x_val, y_val), (x_val, y_val, sample_weight_val) or a "
                     f"dataset, received {type(data).__name__}")


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


def _batch_size(batch_size, what):
    if batch_size is None:
        return 32
    if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size <= 0:
        raise InputError(f"{what}: batch_size expected a positive int, received {batch_size!r}")
    return batch_size


def evaluate(model, x, y, sample_weight=None, batch_size=None, verbose=0, callbacks=None, return_dict=False):
    what = f"Model {model.name!r}.evaluate"
    batch_size = _batch_size(batch_size, what)
    prepared = _prepare(model, x, y, what)
    weights = None
    if prepared is None and sample_weight is not None:
        raise InputError(f"{what}: sample_weight expected with arrays, received it with a dataset")
    if prepared is not None:
        weights = sample_weights(prepared[1], sample_weight, None, what)
    executable = model._executable("eval", weighted=weights is not None)
    cbs = _callback_list(model, callbacks, 0 if verbose == "auto" else verbose, {"verbose": verbose})
    metrics = _metrics(model)
    cbs.on_test_begin({})
    batches = _dataset_batches(x, model) if prepared is None else \
        da.batches(prepared[0] + prepared[1] + ([] if weights is None else [weights]), batch_size)
    logs = _run_batches(model, executable, batches, metrics, cbs, "test", train=False)
    cbs.on_test_end(logs)
    if return_dict:
        return logs
    values = [logs[m.name] for m in metrics]
    return values[0] if len(values) == 1 else values


def on_batch(model, x, y, return_dict, train, sample_weight=None, class_weight=None):
    """``train_on_batch`` / ``test_on_batch``: one step on the whole of ``x, y``; its metrics, reset first."""
    what = f"Model {model.name!r}.{'train' if train else 'test'}_on_batch"
    if da.is_dataset(x):
        raise InputError(f"{what}: expected arrays for one batch, received a dataset; use fit/evaluate for datasets")
    xs, ys = _prepare(model, x, y, what)
    weights = sample_weights(ys, sample_weight, class_weight, what)
    if train:
        model._optimizers()
        model.stop_training = False
    executable = model._executable("train" if train else "eval", weighted=weights is not None)
    metrics = _metrics(model)
    batch = tuple(xs) + tuple(ys) + (() if weights is None else (weights,))
    logs = _run_batches(model, executable, [batch], metrics, callbacks_mod.CallbackList([], model, {}),
                        "train" if train else "test", train=train)
    if return_dict:
        return logs
    values = [logs[m.name] for m in metrics]
    return values[0] if len(values) == 1 else values


def first_array(x):
    """The first input array of ``x`` (an array, or a list or dict of them)."""
    if isinstance(x, dict):
        x = list(x.values())
    return np.asarray(x[0] if isinstance(x, (list, tuple)) else x)


def predict(model, x, batch_size, verbose, callbacks):
    what = f"Model {model.name!r}.predict"
    batch_size = _batch_size(batch_size, what)
    if da.is_dataset(x):
        x = np.concatenate([item[0] if isinstance(item, tuple) else item for item in x.as_numpy_iterator()])
    xs, _ = _prepare(model, x, None, what, with_labels=False)
    executable = model._executable("predict")
    outputs = [executable(list(batch)) for batch in da.batches(xs, batch_size)]
    if not outputs:
        raise InputError(f"{what}: expected at least one sample, received an empty array")
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
