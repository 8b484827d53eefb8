"""ModelCheckpoint: save the model (or its weights) during ``fit``, every epoch or every N batches (Keras 3's
callback).  The files are Keras' own formats: ``.keras`` (or legacy ``.h5``) and ``.weights.h5``."""
import os
import warnings

from ..errors import ConfigError
from .callback import say
from .monitor import MonitorCallback


class ModelCheckpoint(MonitorCallback):
    """Save to ``filepath``, which may name log values and the epoch (``"ckpt-{epoch:02d}-{val_loss:.3f}.keras"``;
    ``{batch}`` too when saving every N batches).

    ``save_best_only``: save only when ``monitor`` improves on the best value so far (the first one being
    ``initial_value_threshold``).  ``save_weights_only``: ``model.save_weights`` (a ``.weights.h5`` path) instead
    of ``model.save``.  ``save_freq``: ``"epoch"`` or every N batches (N training steps)."""

    def __init__(self, filepath, monitor="val_loss", verbose=0, save_best_only=False, save_weights_only=False,
                 mode="auto", save_freq="epoch", initial_value_threshold=None):
        super().__init__(monitor, mode, initial_value_threshold)
        self.filepath = os.fspath(filepath)
        self.verbose, self.save_best_only, self.save_weights_only = verbose, save_best_only, save_weights_only
        if save_freq != "epoch" and (isinstance(save_freq, bool) or not isinstance(save_freq, int) or save_freq < 1):
            raise ConfigError(f"ModelCheckpoint: save_freq expected 'epoch' or a positive int (batches), received "
                              f"{save_freq!r}")
        self.save_freq = save_freq
        if save_weights_only and not self.filepath.endswith(".weights.h5"):
            raise ConfigError(f"ModelCheckpoint(save_weights_only=True): expected a filepath ending in .weights.h5 "
                              f"(Keras' weights format), received {self.filepath!r}")
        if not save_weights_only and not self.filepath.endswith((".keras", ".h5")):
            raise ConfigError(f"ModelCheckpoint: expected a filepath ending in .keras (Keras' model format) or .h5, "
                              f"received {self.filepath!r}")
        self._since_save, self._last_batch, self._epoch = 0, None, 0

    @property
    def reads_batch_logs(self):
        return self.save_freq != "epoch" and self._names_logs()

    @property
    def reads_epoch_logs(self):
        return self.save_freq == "epoch" and self._names_logs()

    def _names_logs(self):
        return self.save_best_only or "{" in self.filepath

    def on_epoch_begin(self, epoch, logs=None):
        self._epoch = epoch

    def on_train_batch_end(self, batch, logs=None):
        if self.save_freq != "epoch" and self._batch_due(batch):
            self._save(self._epoch, batch, logs)

    def on_epoch_end(self, epoch, logs=None):
        if self.monitor_op is None:
            self._set_monitor_op()
        if self.save_freq == "epoch":
            self._save(epoch, None, logs)

    def _batch_due(self, batch):
        # a hook may end several batches (steps_per_execution): count them all; a new epoch restarts at 0
        new = batch + 1 if self._last_batch is None or batch <= self._last_batch else batch - self._last_batch
        self._since_save, self._last_batch = self._since_save + new, batch
        if self._since_save < self.save_freq:
            return False
        self._since_save = 0
        return True

    def _save(self, epoch, batch, logs):
        logs = logs or {}
        filepath = self._path(epoch, batch, logs)
        if not self._wanted(epoch, logs, filepath):
            return
        folder = os.path.dirname(filepath)
        if folder:
            os.makedirs(folder, exist_ok=True)
        if os.path.isdir(filepath):
            raise ConfigError(f"ModelCheckpoint: expected a file path, received {filepath!r}, an existing directory")
        if self.save_weights_only:
            self.model.save_weights(filepath, overwrite=True)
        else:
            self.model.save(filepath, overwrite=True)
        if self.verbose > 0:
            say(f"\nEpoch {epoch + 1}: finished saving model to {filepath}")

    def _path(self, epoch, batch, logs):
        fields = dict(logs) if batch is None or "batch" in logs else {**logs, "batch": batch + 1}
        try:
            return self.filepath.format(**{**fields, "epoch": epoch + 1})
        except (KeyError, IndexError) as e:
            raise ConfigError(f"ModelCheckpoint: the filepath {self.filepath!r} names {e}, expected only 'epoch', "
                              f"'batch' or logged values {sorted(fields)}") from None

    def _wanted(self, epoch, logs, filepath):
        if not self.save_best_only:
            if self.verbose > 0:
                say(f"\nEpoch {epoch + 1}: saving model to {filepath}")
            return True
        current = self._monitored(logs, "Saving the best model")
        if current is None:
            return True         # Keras saves then, having warned
        if getattr(current, "ndim", 0):
            warnings.warn(f"ModelCheckpoint: save_best_only needs a scalar monitor, received {self.monitor!r} of shape "
                          f"{current.shape}; saving every time", stacklevel=3)
            return True
        best = "None" if self.best is None else f"{self.best:.5f}"
        if self._is_improvement(current, self.best):
            if self.verbose > 0:
                say(f"\nEpoch {epoch + 1}: {self.monitor} improved from {best} to {current:.5f}, saving model to "
                    f"{filepath}")
            self.best = current
            return True
        if self.verbose > 0:
            say(f"\nEpoch {epoch + 1}: {self.monitor} did not improve from {best}")
        return False
