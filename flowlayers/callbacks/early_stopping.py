"""EarlyStopping: stop ``fit`` when a monitored value has stopped improving (Keras 3's callback)."""
from ..errors import ConfigError
from .callback import say
from .monitor import MonitorCallback


class EarlyStopping(MonitorCallback):
    """Stop training after ``patience`` epochs without an improvement of ``monitor`` by more than ``min_delta``.

    ``baseline``: training also stops if ``monitor`` does not beat it within ``patience`` epochs.
    ``restore_best_weights``: at the end, the weights of the best epoch seen (from ``start_from_epoch`` on) are set
    back, whether training stopped early or not.  ``start_from_epoch``: epochs before it (a warm-up) are not watched.
    """

    def __init__(self, monitor="val_loss", min_delta=0, patience=0, verbose=0, mode="auto", baseline=None,
                 restore_best_weights=False, start_from_epoch=0):
        super().__init__(monitor, mode, min_delta=min_delta)
        for name, value in (("patience", patience), ("start_from_epoch", start_from_epoch)):
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise ConfigError(f"EarlyStopping: {name} expected an int >= 0 (epochs), received {value!r}")
        self.patience, self.verbose, self.baseline = patience, verbose, baseline
        self.restore_best_weights, self.start_from_epoch = restore_best_weights, start_from_epoch
        self.wait, self.stopped_epoch, self.best_weights, self.best_epoch = 0, 0, None, 0

    def on_train_begin(self, logs=None):
        self.wait, self.stopped_epoch, self.best, self.best_weights, self.best_epoch = 0, 0, None, None, 0

    def on_epoch_end(self, epoch, logs=None):
        if self.monitor_op is None:
            self._set_monitor_op()
        current = self._monitored(logs, "Early stopping")
        if current is None or epoch < self.start_from_epoch:
            return
        if self.restore_best_weights and self.best_weights is None:
            self.best_weights, self.best_epoch = self.model.get_weights(), epoch
        self.wait += 1
        if self._is_improvement(current, self.best):
            self.best, self.best_epoch = current, epoch
            if self.restore_best_weights:
                self.best_weights = self.model.get_weights()
            if self.baseline is None or self._is_improvement(current, self.baseline):
                self.wait = 0       # an improvement that does not reach the baseline still counts as waiting
            return
        if self.wait >= self.patience and epoch > 0:
            self.stopped_epoch = epoch
            self.model.stop_training = True

    def on_train_end(self, logs=None):
        if self.stopped_epoch > 0 and self.verbose > 0:
            say(f"Epoch {self.stopped_epoch + 1}: early stopping")
        if self.restore_best_weights and self.best_weights is not None:
            if self.verbose > 0:
                say(f"Restoring model weights from the end of the best epoch: {self.best_epoch + 1}.")
            self.model.set_weights(self.best_weights)
