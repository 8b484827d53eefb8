"""Callbacks: Keras' protocol, driven without importing Keras.

Any object with Keras' hook methods works — ``keras.callbacks.EarlyStopping``,
``CSVLogger``, ``ModelCheckpoint``, ``TensorBoard`` and your own.
"""
import os
import sys
import time

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
    """A Keras-like progress bar: ``12/20 [=====>....] - 1s - loss: 0.41 - accuracy: 0.88``."""

    def __init__(self, verbose=1, stream=None):
        super().__init__()
        self.verbose, self.stream = verbose, stream or sys.stdout

    @property
    def reads_batch_logs(self):
        return self.verbose == 1     # the bar is redrawn after each batch; otherwise one line per epoch

    @property
    def reads_epoch_logs(self):
        return bool(self.verbose)

    def on_epoch_begin(self, epoch, logs=None):
        self.start, self.seen = time.perf_counter(), 0
        if self.verbose:
            print(f"Epoch {epoch + 1}/{self.params.get('epochs', '?')}", file=self.stream)

    def on_train_batch_end(self, batch, logs=None):
        self.seen = batch + 1
        if self.verbose == 1:
            self._line(batch + 1, logs, end="\r")

    def on_epoch_end(self, epoch, logs=None):
        if self.verbose:      # an epoch of unknown length (a dataset's) ends after the batches it had
            self._line(self.params.get("steps") or self.seen, logs, end="\n")

    def _line(self, done, logs, end):
        total = self.params.get("steps") or done
        width = 30
        filled = int(width * done / total) if total else width
        bar = "=" * max(filled - 1, 0) + (">" if filled < width else "=") + "." * (width - filled)
        elapsed = time.perf_counter() - self.start
        metrics = " - ".join(f"{k}: {v:.4f}" for k, v in (logs or {}).items() if isinstance(v, float))
        print(f"{done}/{total} [{bar}] - {elapsed:.0f}s" + (f" - {metrics}" if metrics else ""), end=end,
              file=self.stream, flush=True)


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

    def on_epoch_end(self, epoch, logs=None):
        if self.save_freq == "epoch":
            self.model.trainer.save_checkpoint(self._path, self.model.trainer.fit_state.position(end_of_epoch=True))

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
