"""Callbacks: Keras' protocol, driven without importing Keras.

Any object with Keras' hook methods works — ``keras.callbacks.EarlyStopping``,
``CSVLogger``, ``ModelCheckpoint``, ``TensorBoard`` and your own.
"""
import os
import re
import sys
import time

import numpy as np

from . import engine, env, metrics, missing, settings, tensorboard
from .errors import CheckpointError, ConfigError
from .framework import checkpoint_format as checkpoint

HOOKS = ("on_train_begin", "on_train_end", "on_epoch_begin", "on_epoch_end", "on_train_batch_begin",
         "on_train_batch_end", "on_test_begin", "on_test_end", "on_test_batch_begin", "on_test_batch_end",
         "on_predict_begin", "on_predict_end", "on_predict_batch_begin", "on_predict_batch_end")


class Callback:
    """Base class with Keras' hooks; ``self.model`` and ``self.params`` are set before training."""

    def __init__(self):
        self.model, self.params = None, {}

    def set_model(self, model):
        self.model = model

    def set_params(self, params):
        self.params = params


for _hook in HOOKS:
    setattr(Callback, _hook, lambda self, *args, **kwargs: None)


class History(Callback):
    """Per-epoch logs: ``history.history["loss"]`` is a list, one value per epoch."""

    reads_epoch_logs = False     # it keeps them; values still on the engine are read when ``history`` is

    def __init__(self):
        super().__init__()
        self.epoch, self._history = [], {}

    @property
    def history(self):
        for values in self._history.values():
            values[:] = [float(v) if isinstance(v, metrics.Deferred) else v for v in values]
        return self._history

    def on_epoch_end(self, epoch, logs=None):
        self.epoch.append(epoch)
        for k, v in (logs or {}).items():
            self._history.setdefault(k, []).append(v)


class ProgbarLogger(Callback):
    """Keras 3's progress bar, for ``fit``, ``evaluate`` and ``predict``::

        Epoch 1/3
        12/20 ━━━━━━━━━━━━━━━━━━━━ 1s 52ms/step - accuracy: 0.8812 - loss: 0.4102       (running: the ETA)
        20/20 ━━━━━━━━━━━━━━━━━━━━ 2s 50ms/step - accuracy: 0.8904 - loss: 0.3877       (done: the time taken)

    ``verbose``: 1 redraws the bar after each batch (at most every 0.05 s), 2 prints one line per epoch
    (``20/20 - 2s - 50ms/step - loss: 0.3877``), 0 nothing; None (default) takes the ``verbose`` the loop was
    called with (``"auto"``: 1).  ``Epoch i/n`` heads each epoch of a ``fit`` of several.  The time per step leaves
    the first step out where there are others (it compiles).  On a terminal the bar is drawn as Keras draws it, in
    colour; elsewhere (a log file) without colour codes, its cells still to go drawn thin."""

    width, interval = 20, 0.05

    def __init__(self, verbose=None, stream=None):
        super().__init__()
        self.verbose = self._given = verbose
        self.stream, self._in_fit, self._bar = stream, False, None

    def set_params(self, params):
        super().set_params(params)
        if self._given is None:
            verbose = params.get("verbose", 1)
            self.verbose = 1 if verbose == "auto" else verbose

    @property
    def reads_batch_logs(self):
        return self.verbose == 1     # the bar is redrawn after each batch; otherwise one line per epoch

    @property
    def reads_epoch_logs(self):
        return bool(self.verbose)

    def _out(self):
        if not env.speaks():        # process 0 speaks for a job of several (every process reads the same logs)
            return _SILENT
        return self.stream or sys.stdout

    def _start(self):
        self._bar = _Bar(self.params.get("steps"), self.verbose, self._out(), self.width, self.interval)

    def on_train_begin(self, logs=None):
        self._in_fit = True          # evaluation inside fit (validation) draws no bar of its own

    def on_train_end(self, logs=None):
        self._in_fit = False

    def on_epoch_begin(self, epoch, logs=None):
        self._start()
        epochs = self.params.get("epochs", 1)
        if self.verbose and epochs > 1:
            print(f"Epoch {epoch + 1}/{epochs}", file=self._out(), flush=True)

    def on_test_begin(self, logs=None):
        if not self._in_fit:
            self._start()

    def on_predict_begin(self, logs=None):
        self._start()

    def on_train_batch_end(self, batch, logs=None):
        self._step(batch, logs)

    def on_test_batch_end(self, batch, logs=None):
        if not self._in_fit:
            self._step(batch, logs)

    def on_predict_batch_end(self, batch, logs=None):
        self._step(batch, None)      # predictions are not metrics

    def _step(self, batch, logs):
        # verbose=2's line times the whole epoch, its first step included, as Keras' does: the bar sees only its end
        self._bar.seen = batch + 1
        if self.verbose == 1:
            self._bar.step(batch + 1, logs)

    def on_epoch_end(self, epoch, logs=None):
        self._bar.end(logs)

    def on_test_end(self, logs=None):
        if not self._in_fit:
            self._bar.end(logs)

    def on_predict_end(self, logs=None):
        self._bar.end(None)


class _Silent:
    """Where a process that does not speak for its job draws its bar: nowhere."""

    def write(self, text):
        return len(text)

    def flush(self):
        pass


_SILENT = _Silent()


class _Bar:
    """One bar: steps done of ``target`` (None: unknown until the end), redrawn in place."""

    def __init__(self, target, verbose, stream, width, interval):
        self.target, self.verbose, self.stream, self.width, self.interval = target, verbose, stream, width, interval
        self.start, self.last_draw = time.time(), 0.0
        self.after_first = None      # when step 1 ended: the later steps' time per step leaves it out
        self.seen, self.drawn_width, self.values = 0, 0, {}
        self.colour = bool(getattr(stream, "isatty", lambda: False)())

    def step(self, current, logs):
        self._update(current, logs, final=False)

    def end(self, logs):
        if self.target is None:      # an epoch of unknown length ends after the batches it had
            self.target = self.seen
        self._update(self.target, logs, final=True)

    def _update(self, current, logs, final):
        for name, value in (logs or {}).items():
            self.values[name] = value
        self.seen, now = current, time.time()
        per_step = self._per_step(current, now)
        if self.verbose == 1 and (final or now - self.last_draw >= self.interval):
            self._draw(current, now, per_step, final)
            self.last_draw = now        # the interval runs from the last redraw
        elif self.verbose == 2 and final and self.target:
            count = f"{current:{len(str(self.target))}d}/{self.target}"
            line = f"{count} - {now - self.start:.0f}s -{_per_unit(per_step)}" + self._metrics(two=True)
            self.stream.write(line + "\n")
            self.stream.flush()

    def _per_step(self, current, now):
        if not current:
            return 0.0
        if self.after_first is not None and current > 1:
            per_step = (now - self.after_first) / (current - 1)
        else:
            per_step = (now - self.start) / current
        if current == 1:
            self.after_first = now
        return per_step

    def _draw(self, current, now, per_step, final):
        bold = (lambda t: f"\x1b[1m{t}\x1b[0m") if self.colour else (lambda t: t)
        if self.target:
            done = int(self.width * current / self.target)
            left = "━" * (self.width - done)
            bar = bold(f"{current:{len(str(self.target))}d}/{self.target}") + " " + (
                (f"\x1b[32m{'━' * done}\x1b[0m" if done else "") + f"\x1b[37m{left}\x1b[0m" if self.colour
                else "━" * done + "─" * (self.width - done))
        else:
            bar = f"{current:7d}/Unknown"
        if self.target and not final:
            info = " " + bold(_eta(per_step * (self.target - current)))
        else:
            info = " " + bold(f"{now - self.start:.0f}s")
        text = bar + info + _per_unit(per_step) + self._metrics()
        width = len(_plain(text))
        text += " " * max(self.drawn_width - width, 0)
        self.stream.write("\b" * self.drawn_width + "\r" + text + ("\n" if final else ""))
        self.stream.flush()
        self.drawn_width = width

    def _metrics(self, two=False):
        out = ""
        for name, value in self.values.items():
            value = float(np.mean(np.asarray(float(value) if isinstance(value, metrics.Deferred) else value,
                                             dtype=np.float64)))
            small = value <= 1e-3 if two else abs(value) <= 1e-3      # Keras' verbose=2 compares the value itself
            out += f" - {name}: {value:.4e}" if small else f" - {name}: {value:.4f}"
        return out


def _eta(seconds):
    """A time left as Keras writes it: ``1:02:03``, ``2:03`` or ``45s``."""
    if seconds > 3600:
        return f"{int(seconds // 3600)}:{int(seconds % 3600 // 60):02d}:{int(seconds % 60):02d}"
    if seconds > 60:
        return f"{int(seconds // 60)}:{int(seconds % 60):02d}"
    return f"{int(seconds)}s"


def _per_unit(seconds):
    """`` 52ms/step``: the time per step in the unit that keeps it a whole number."""
    if seconds >= 1 or seconds == 0:
        return f" {seconds:.0f}s/step"
    if seconds >= 1e-3:
        return f" {seconds * 1e3:.0f}ms/step"
    return f" {seconds * 1e6:.0f}us/step"


def _plain(text):
    """``text`` without colour codes (how wide it shows)."""
    return re.sub(r"\x1b\[[0-9;]*m", "", text)


class BackupAndRestore(Callback):
    """Resume a killed ``fit`` at its last saved step (Keras' callback resumes at the start of an epoch).

        backup = flow.callbacks.BackupAndRestore("/tmp/backup", save_freq=100)
        model.fit(x, y, epochs=10, callbacks=[backup])   # killed? run the same command again

    Each save holds the weights, the optimizer's slots and step, the seed and the
    data position (epoch, batches done in it, the epoch's running metric sums);
    the rerun skips the batches already done, in the same order, and ends with
    the weights an uninterrupted run ends with.  ``save_freq``: ``"epoch"`` or
    every N training steps.  ``delete_checkpoint``: remove the backup once
    ``fit`` completes.

    Exact resumption needs the rerun to see the same data in the same order:
    numpy input is shuffled from the seed (``flow.config.set_seed``); a
    ``tf.data.Dataset`` must shuffle with a seed, ``ds.shuffle(n, seed=1)``.
    A seeded shuffle reorders each epoch, and the rerun replays the epochs
    before the resumed one so that it gets its own order back.  An unseeded
    shuffle draws a new order in every process and cannot be replayed: the
    run resumes at the right step, but on other batches.  A backup is refused
    (CheckpointError, nothing loaded) if the rerun's data has other batches per
    epoch, ``batch_size`` or, for a dataset, other element shapes or dtypes.
    """

    def __init__(self, backup_dir, save_freq="epoch", delete_checkpoint=True):
        super().__init__()
        if not backup_dir:
            raise ConfigError(f"BackupAndRestore: backup_dir expected a directory path, received {backup_dir!r}")
        if save_freq != "epoch" and (isinstance(save_freq, bool) or not isinstance(save_freq, int) or save_freq <= 0):
            raise ConfigError(f"BackupAndRestore: save_freq expected 'epoch' or a positive int (steps), received "
                              f"{save_freq!r}")
        self.backup_dir, self.save_freq, self.delete_checkpoint = os.fspath(backup_dir), save_freq, delete_checkpoint
        self._path = os.path.join(self.backup_dir, "latest")

    def on_train_begin(self, logs=None):
        self._steps_seen = self.model.optimizer.iterations
        if not checkpoint.exists(self._path):
            return
        where = f"BackupAndRestore({self.backup_dir!r})"
        state = checkpoint.Reader(self._path).state
        seed = state.get("rng", {}).get("seed")
        if seed != settings.seed():
            raise CheckpointError(f"{where}: expected a backup of a run with flow.config.set_seed({settings.seed()}), "
                                  f"received one of seed {seed}; rerun with the same seed, or delete the backup")
        if "position" not in state:
            raise CheckpointError(f"{where}: expected a backup written by BackupAndRestore, received a checkpoint "
                                  f"without a training position in {self._path!r}")
        self.model.trainer.fit_state.resume(state["position"], where)
        self.model.trainer.load_checkpoint(self._path)
        self._steps_seen = self.model.optimizer.iterations

    def on_train_batch_end(self, batch, logs=None):
        # every save_freq steps; a hook may end several steps (steps_per_execution): then when they passed one
        before, self._steps_seen = self._steps_seen, self.model.optimizer.iterations
        if self.save_freq != "epoch" and self._steps_seen // self.save_freq > before // self.save_freq:
            self.model.trainer.save_checkpoint(self._path, self.model.trainer.fit_state.position())
            env.restart_point()     # the launcher may start the job again here, from this backup (--elastic)

    def on_epoch_end(self, epoch, logs=None):
        if self.save_freq == "epoch":
            self.model.trainer.save_checkpoint(self._path, self.model.trainer.fit_state.position(end_of_epoch=True))
            env.restart_point()

    def on_train_end(self, logs=None):
        if self.delete_checkpoint and env.process_index() == 0:    # one process removes it, for all
            checkpoint.remove(self._path)
            if os.path.isdir(self.backup_dir) and not os.listdir(self.backup_dir):
                os.rmdir(self.backup_dir)
        engine.barrier(f"BackupAndRestore({self.backup_dir!r}) done")


def reads_logs(callback, hook):
    """Whether ``callback``'s ``hook`` (a batch or epoch end) may read its logs: it says so (``reads_batch_logs``,
    ``reads_epoch_logs``), or the hook is its own (not the no-op of flowlayers' or Keras' base class).  Where none
    does, the training loop leaves the metrics on the engine: reading them would wait for the steps."""
    declared = getattr(callback, "reads_batch_logs" if "batch" in hook else "reads_epoch_logs", None)
    if declared is not None:
        return bool(declared)
    fn = getattr(type(callback), hook, None)
    if fn is None or fn is getattr(Callback, hook):
        return False
    return not (fn.__qualname__ == f"Callback.{hook}" and fn.__module__.startswith("keras."))


class CallbackList:
    """Calls each hook on every callback that has it."""

    def __init__(self, callbacks, model, params):
        self.callbacks = list(callbacks)
        for cb in self.callbacks:
            tensorboard.adapt(cb)      # Keras' TensorBoard: the weights' host values, no graph
            if hasattr(cb, "set_model"):
                cb.set_model(model)
            if hasattr(cb, "set_params"):
                cb.set_params(params)

    def reads_logs(self, hook):
        return any(reads_logs(cb, hook) for cb in self.callbacks)

    def __getattr__(self, hook):
        if hook not in HOOKS:
            raise AttributeError(hook)

        def call(*args):
            for cb in self.callbacks:
                fn = getattr(cb, hook, None)
                if fn is not None:
                    fn(*args)
        return call


def __getattr__(name):
    """A Keras ``callbacks`` name flowlayers lacks: a ConfigError naming it and what to use instead."""
    return missing.refuse("callbacks", name, ConfigError, globals())
