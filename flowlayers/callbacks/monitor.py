"""What EarlyStopping, ReduceLROnPlateau and ModelCheckpoint share: a monitored log value and its direction.

As in Keras 3: ``mode="auto"`` minimises a ``loss`` (``val_`` or not) and otherwise asks the model's metric of that
name which way is better (its ``_direction``, ``"up"`` or ``"down"``); an improvement beats the best value so far by
more than ``min_delta``.
"""
import operator
import warnings

from .. import metrics
from ..errors import ConfigError
from .callback import Callback

MODES = ("auto", "min", "max")


class MonitorCallback(Callback):
    """Base of the callbacks that watch ``monitor`` in the epoch logs; ``baseline`` is the first best value."""

    def __init__(self, monitor="val_loss", mode="auto", baseline=None, min_delta=0):
        super().__init__()
        what = type(self).__name__
        if mode not in MODES:
            raise ConfigError(f"{what}: mode expected one of {list(MODES)}, received {mode!r}")
        if not isinstance(monitor, str) or not monitor:
            raise ConfigError(f"{what}: monitor expected the name of a logged value (e.g. 'val_loss'), received "
                              f"{monitor!r}")
        self.monitor, self.mode, self.best, self.min_delta = monitor, mode, baseline, abs(min_delta)
        self.monitor_op = None

    def _set_monitor_op(self):
        """Which way is better, decided once the model (and its metrics) are known."""
        direction = {"min": "down", "max": "up"}.get(self.mode) or self._direction_of_monitor()
        self.monitor_op = operator.lt if direction == "down" else operator.gt

    def _direction_of_monitor(self):
        name = self.monitor.removeprefix("val_")
        if name == "loss":
            return "down"
        found = {m.name: getattr(m, "_direction", None) for m in getattr(self.model, "metrics", ())}
        if found.get(name) in ("up", "down"):
            return found[name]
        raise ConfigError(f"{type(self).__name__}: cannot tell whether monitor={self.monitor!r} should be maximised "
                          f"or minimised (expected 'loss' or a metric that says, among "
                          f"{sorted(n for n, d in found.items() if d)}); pass mode='max' or mode='min'")

    def _is_improvement(self, value, reference):
        if reference is None:
            return True
        delta = -self.min_delta if self.monitor_op is operator.lt else self.min_delta
        return self.monitor_op(value - delta, reference)

    def _monitored(self, logs, what):
        """The monitored value of these logs as a float, or None (with Keras' warning) where it is not logged."""
        value = (logs or {}).get(self.monitor)
        if value is None:
            warnings.warn(f"{what} conditioned on metric `{self.monitor}` which is not available. Available metrics "
                          f"are: {','.join(logs or {})}", stacklevel=3)
            return None
        return float(value) if isinstance(value, metrics.Deferred) else value
