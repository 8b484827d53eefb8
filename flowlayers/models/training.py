"""The loops behind ``fit``, ``evaluate`` and ``predict``: the EpochIterator's batches in, exact averages out."""
import warnings

import numpy as np

from .. import callbacks as callbacks_mod, engine, metrics as metrics_mod, settings
from ..errors import CheckpointError, InputError
from .batch_fingerprint import Fingerprint
from .epoch_iterator import EpochIterator
from .running import alone


class FitState:
    """Where ``fit`` is: the epoch, the batches done in it and their running metric sums.

    Together with the weights, the optimizer state and the seed, this is all a
    resumed run needs to take the very same next step: the data order is
    ``rng([seed, epoch])`` (a dataset's own seeded shuffle, replayed) and
    dropout is stateless in (seed, op, step).  ``data`` describes a dataset's
    elements, so a backup is not resumed on other data.  ``fingerprinting``
    (set by a backup that saves mid-epoch): a position mid-epoch holds the
    fingerprint of the epoch's batches done, and a resumed run checks the
    batches it skips against it (``check_order``: unless told not to).
    """

    def __init__(self, metrics, steps, batch_size, data=None, seed=None):
        self.metrics, self.steps, self.batch_size, self.data = metrics, steps, batch_size, data
        self.seed = seed        # the fit's (its Placement's): a seed set during the fit reaches the next one
        self.epoch, self.batch = 0, 0
        self.resume_at, self.where = None, None
        self.fingerprinting, self.check_order = False, True
        self.fingerprint, self.expected = None, None     # this epoch's running one; the backup's, to check

    def position(self, end_of_epoch=False):
        where = {"steps": self.steps, "batch_size": self.batch_size, "data": self.data}
        if end_of_epoch:
            return {"epoch": self.epoch + 1, "batch": 0, "metrics": [], **where}
        # each metric's sums: [name, index of the sum, its value]
        sums = [[m.name, j, float(v)] for m in self.metrics for j, v in enumerate(_sums(m))]
        if self.fingerprint is not None:
            where["fingerprint"] = self.fingerprint.hexdigest()
        return {"epoch": self.epoch, "batch": self.batch, "metrics": sums, **where}

    def resume(self, position, where):
        """Start at a saved position; it must come from a run with the same batches per epoch and data."""
        for key, what in (("steps", "batches per epoch"), ("batch_size", "batch_size"), ("data", "dataset elements")):
            saved, mine = position.get(key), getattr(self, key)
            if saved is not None and mine is not None and saved != mine:
                raise CheckpointError(f"{where}: expected a backup of a run with {what} {mine}, received one with "
                                      f"{saved}; rerun with the same data and batch_size, or delete the backup")
        self.resume_at, self.where = position, where

    def begin_epoch(self, epoch, batch, sums=(), fingerprint=None):
        """Start epoch ``epoch`` at ``batch`` (a resumed one: its metric ``sums`` and the ``fingerprint`` of the
        batches before it, which ``check_skipped`` compares with the skipped batches ``done`` was given; None: a
        backup saved without one)."""
        self.epoch, self.batch = epoch, batch
        self.expected = fingerprint if batch and self.check_order else None
        self.fingerprint = Fingerprint() if self.fingerprinting or self.expected is not None else None
        for m in self.metrics:
            m.reset_state()
        saved = {}
        for name, j, value in sums:
            saved.setdefault(name, {})[int(j)] = value
        for m in self.metrics:
            if m.name in saved:
                m.sums = [saved[m.name][j] for j in sorted(saved[m.name])]

    def done(self, batches):
        """``batches`` were trained on (or, resuming, skipped as done before): into the epoch's fingerprint."""
        if self.fingerprint is not None:
            for batch in batches:
                self.fingerprint.add(batch)

    def check_skipped(self):
        """Refuse a resumed epoch whose skipped batches are not the ones its backup's run trained on."""
        if self.expected is None or self.fingerprint.hexdigest() == self.expected:
            return
        raise CheckpointError(
            f"{self.where}: expected the {self.batch} batch(es) of epoch {self.epoch + 1} that the interrupted run "
            f"trained on before its backup, received other batches (fingerprint {self.fingerprint.hexdigest()}, "
            f"saved {self.expected}): the data's order differs from the interrupted run's (another shuffle seed, "
            f"another tf.random.set_seed, an unseeded shuffle, or other data), and resuming would train some "
            f"samples twice and others never. Rerun with the same data and seeds, or delete the backup to start "
            f"the run over, or pass BackupAndRestore(..., check_order=False) to resume on these batches anyway")


def _sums(metric):
    sums = metric.sums
    return [] if sums is None else sums


def _run_batches(model, step, groups, metrics, callbacks, hook, train, state=None, deferred=False):
    """Run ``step`` on each Group of batches (``steps_per_execution`` > 1: groups of that many batches of one size,
    each group one call, its callbacks' batch hooks called once, as Keras does); metrics are exact running means
    over the samples seen.

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
    for group in groups:
        getattr(callbacks, f"on_{hook}_batch_begin")(at, logs)
        sums = iter(step(group))       # each metric's own sums, in order (stacked over a group of several)
        for m in metrics:
            m.add_sums([next(sums) for _ in range(m.step_outputs)], group.samples)
        at += len(group)
        if each_batch:
            logs = {m.name: m.result() for m in metrics}
        if state is not None:
            state.batch = at
            state.done(group.batches)
        getattr(callbacks, f"on_{hook}_batch_end")(at - 1, logs)
        if train and model.stop_training:
            break
    if at == start:     # no batch ran
        return logs
    return {m.name: m.deferred_result() if deferred else m.result() for m in metrics}


class _Stepper:
    """``step(group)`` -> the step's results for ``phase`` on an ``epoch_iterator.Group``: the compiled step with
    or without sample weights, as the batches have them (a batch is inputs, labels per loss, then maybe weights),
    run at the optimizer's next steps when training."""

    def __init__(self, model, phase, placement):
        self.model, self.phase, self.placement = model, phase, placement
        self.labelled = len(model.inputs) + sum(1 for h in model.trainer.heads or [None] if h is None or h.loss is not None)
        self.optimizer = model.optimizer if phase == "train" else None
        self.compiled = {}       # weighted -> the step, looked up once per call (its key walks every weight)

    def _for(self, group):
        weighted = group.width > self.labelled
        if weighted not in self.compiled:
            self.compiled[weighted] = self.model.trainer.step(self.phase, weighted=weighted, placement=self.placement)
        return self.compiled[weighted]

    def __call__(self, group):
        compiled = self._for(group)
        sources = group.sources
        # rows of whole training arrays, to an engine that keeps them on its devices: the step gathers its rows
        # there, and the host sends their numbers instead of the rows
        if len(group) == 1 and (sources is None or not compiled.takes_rows(group.batch_rows, sources)):
            return compiled.run(group.arrays(), self.optimizer)
        return compiled.run_steps(group.feeds(), len(group), self.optimizer)


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
    data = EpochIterator.for_model(model, x, y, what, "fit", batch_size, sample_weight=sample_weight,
                                   class_weight=class_weight, validation_split=validation_split,
                                   validation_data=validation_data, shuffle=shuffle, seed=placement.seed,
                                   steps_per_epoch=steps_per_epoch, finite=finite)
    validation = data.validation(model, what, batch_size, finite)     # checked before the first step
    model.trainer.restore_deferred()      # an optimizer state loaded before compile lands now
    history = callbacks_mod.History()
    cbs = _callback_list(model, callbacks, verbose, {"epochs": epochs, "steps": data.steps, "verbose": verbose},
                         history)
    model.history, model.stop_training = history, False
    state = model.trainer.fit_state = FitState(_metrics(model), data.steps, data.batch_size, data.description,
                                                 placement.seed)
    try:
        cbs.on_train_begin({})    # BackupAndRestore restores (or refuses a backup) before the step is built
        step = _Stepper(model, "train", placement)
        resume = state.resume_at or {"epoch": initial_epoch, "batch": 0, "metrics": []}
        data.replay(resume["epoch"] - initial_epoch)
        for epoch in range(resume["epoch"], epochs):
            resumed = epoch == resume["epoch"]
            state.begin_epoch(epoch, resume["batch"] if resumed else 0, resume["metrics"] if resumed else (),
                              resume.get("fingerprint") if resumed else None)
            cbs.on_epoch_begin(epoch, {})
            # the batches of this epoch a resumed run has done already are skipped, in the same order (checked)
            groups = data.groups(epoch, model.steps_per_execution, state.batch, state.where, state.done)
            state.check_skipped()
            logs = _run_batches(model, step, groups, state.metrics, cbs, "train", train=True, state=state,
                                deferred=not cbs.reads_logs("on_epoch_end"))
            if resumed and not state.batch:
                raise data.no_batch()
            if not logs and not resumed:
                warnings.warn(f"{what}: epoch {epoch + 1} received no batches (a generator that has ended, or "
                              f"empty data); training stops here. Pass steps_per_epoch so that each epoch draws that "
                              f"many batches, or a source that can be iterated again (a dataset, a PyDataset)")
                model.stop_training = True
            if validation is not None and not model.stop_training:
                quiet = _callback_list(model, None, 0, {"verbose": 0, "steps": None})
                val, _ = _evaluated(model, validation, quiet, placement)
                logs.update({f"val_{k}": v for k, v in val.items()})
            cbs.on_epoch_end(epoch, logs)
            if model.stop_training:
                break
        cbs.on_train_end({})
    finally:
        model.trainer.fit_state = None
    return history


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
        data = EpochIterator.for_model(model, x, y, what, "evaluate", batch_size, sample_weight=sample_weight,
                                       steps_per_epoch=steps, finite=finite)
        cbs = _callback_list(model, callbacks, verbose, {"verbose": verbose, "epochs": 1, "steps": data.steps or None})
        logs, metrics = _evaluated(model, data, cbs, placement)
        if return_dict:
            return logs
        values = [logs[m.name] for m in metrics]
        return values[0] if len(values) == 1 else values


def _evaluated(model, data, cbs, placement):
    """``(logs, metrics)`` of one pass over the EpochIterator ``data``: at least one batch."""
    metrics = _metrics(model)
    cbs.on_test_begin({})
    logs = _run_batches(model, _Stepper(model, "eval", placement), data.groups(0, model.steps_per_execution),
                        metrics, cbs, "test", train=False)
    if not logs:
        raise data.no_batch()
    cbs.on_test_end(logs)
    return logs, metrics


def on_batch(model, x, y, return_dict, train, sample_weight=None, class_weight=None):
    """``train_on_batch`` / ``test_on_batch``: one step on the whole of ``x, y``; its metrics, reset first."""
    method = f"{'train' if train else 'test'}_on_batch"
    with alone(model, method):
        return _on_batch(model, x, y, return_dict, train, sample_weight, class_weight, f"Model {model.name!r}.{method}")


def _on_batch(model, x, y, return_dict, train, sample_weight, class_weight, what):
    data = EpochIterator.for_model(model, x, y, what, "on_batch", sample_weight=sample_weight,
                                   class_weight=class_weight, finite=not settings.nonfinite_inputs_allowed())
    if train:
        model.trainer.restore_deferred()
        model.stop_training = False
    metrics = _metrics(model)
    logs = _run_batches(model, _Stepper(model, "train" if train else "eval", engine.placement()), data.groups(0, 1),
                        metrics, callbacks_mod.CallbackList([], model, {}), "train" if train else "test", train=train)
    if return_dict:
        return logs
    values = [logs[m.name] for m in metrics]
    return values[0] if len(values) == 1 else values


def first_array(x):
    """The first input array of ``x`` (an array, or a list or dict of them): ``predict_on_batch``'s batch size."""
    if isinstance(x, dict):
        x = list(x.values())
    return np.asarray(x[0] if isinstance(x, (list, tuple)) else x)


def predict(model, x, batch_size, verbose, callbacks, steps=None):
    with alone(model, "predict"):
        return _predict(model, x, batch_size, steps, f"Model {model.name!r}.predict", verbose, callbacks)


def _predict(model, x, batch_size, steps, what, verbose=0, callbacks=None):
    batch_size = _batch_size(batch_size, what)
    data = EpochIterator.for_model(model, x, None, what, "predict", batch_size, steps_per_epoch=steps,
                                   finite=not settings.nonfinite_inputs_allowed())
    compiled = model.trainer.step("predict")
    cbs = _callback_list(model, callbacks, verbose, {"verbose": verbose, "epochs": 1, "steps": data.steps or None})
    cbs.on_predict_begin({})
    outputs = []
    for k, group in enumerate(data.groups(0, 1)):
        cbs.on_predict_batch_begin(k, {})
        outputs.append(compiled.run(group.arrays()))
        cbs.on_predict_batch_end(k, {"outputs": outputs[-1]})
    if not outputs:
        raise data.no_batch()
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
