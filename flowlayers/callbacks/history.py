"""History: what ``fit`` returns."""
from .. import metrics
from .callback import Callback


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
