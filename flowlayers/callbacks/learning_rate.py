"""Callbacks that set the optimizer's learning rate between epochs: LearningRateScheduler, ReduceLROnPlateau.

A rate set here is a plain float on the optimizer; each step reads the rate it runs with, so nothing recompiles.
"""
import inspect

import numpy as np

from ..errors import ConfigError
from .callback import Callback, say
from .monitor import MonitorCallback


def current_rate(optimizer, what):
    """The optimizer's learning rate as a float; a schedule (a rate per step) cannot be set from an epoch's end."""
    rate = optimizer.learning_rate
    if callable(rate):
        raise ConfigError(f"{what}: expected the optimizer {optimizer.name!r} to have a float learning_rate, "
                          f"received the schedule {rate!r}; compile with a float rate to have it set by a callback")
    return float(rate)


class LearningRateScheduler(Callback):
    """Set the learning rate at the start of each epoch to ``schedule(epoch, lr)`` (or ``schedule(epoch)``): epochs
    count from 0, ``lr`` is the current rate.  The rate is logged as ``learning_rate``."""

    def __init__(self, schedule, verbose=0):
        super().__init__()
        if not callable(schedule):
            raise ConfigError(f"LearningRateScheduler: schedule expected a function (epoch, lr) -> lr, received "
                              f"{schedule!r}")
        self.schedule, self.verbose = schedule, verbose

    def _next_rate(self, epoch, rate):
        try:
            inspect.signature(self.schedule).bind(epoch, rate)       # (epoch, lr), *args included, as Keras tries first
            takes_rate = True
        except TypeError:
            takes_rate = False
        except ValueError:      # a builtin without a signature: called as Keras calls it first
            takes_rate = True
        return self.schedule(epoch, rate) if takes_rate else self.schedule(epoch)

    def on_epoch_begin(self, epoch, logs=None):
        optimizer = self.model.optimizer
        rate = self._next_rate(epoch, current_rate(optimizer, "LearningRateScheduler"))
        if isinstance(rate, bool) or not isinstance(rate, (float, np.floating)):
            raise ConfigError(f"LearningRateScheduler: expected the schedule to return a float, received {rate!r} "
                              f"for epoch {epoch}")
        optimizer.learning_rate = float(rate)
        if self.verbose > 0:
            say(f"\nEpoch {epoch + 1}: LearningRateScheduler setting learning rate to {float(rate)}.")

    def on_epoch_end(self, epoch, logs=None):
        if logs is not None:
            logs["learning_rate"] = current_rate(self.model.optimizer, "LearningRateScheduler")


class ReduceLROnPlateau(MonitorCallback):
    """Multiply the learning rate by ``factor`` (< 1) after ``patience`` epochs without an improvement of ``monitor``
    by more than ``min_delta``, never below ``min_lr``; ``cooldown`` epochs after a cut are not counted.  The rate
    is logged as ``learning_rate``."""

    def __init__(self, monitor="val_loss", factor=0.1, patience=10, verbose=0, mode="auto", min_delta=1e-4,
                 cooldown=0, min_lr=0.0, **kwargs):
        super().__init__(monitor, mode, min_delta=min_delta)
        if kwargs:
            raise ConfigError(f"ReduceLROnPlateau: unexpected keyword argument(s) {sorted(kwargs)}")
        if not 0 <= factor < 1:
            raise ConfigError(f"ReduceLROnPlateau: factor expected a number in [0, 1), received {factor!r}")
        self.factor, self.min_lr, self.patience, self.verbose, self.cooldown = factor, min_lr, patience, verbose, cooldown
        self.cooldown_counter, self.wait = 0, 0

    def on_train_begin(self, logs=None):
        self.best, self.cooldown_counter, self.wait = None, 0, 0

    def in_cooldown(self):
        return self.cooldown_counter > 0

    def on_epoch_end(self, epoch, logs=None):
        if self.monitor_op is None:
            self._set_monitor_op()
        logs = {} if logs is None else logs
        logs["learning_rate"] = current_rate(self.model.optimizer, "ReduceLROnPlateau")
        current = self._monitored(logs, "Learning rate reduction")
        if current is None:
            return
        if self.in_cooldown():
            self.cooldown_counter -= 1
            self.wait = 0
        if self._is_improvement(current, self.best):
            self.best, self.wait = current, 0
        elif not self.in_cooldown():
            self.wait += 1
            if self.wait >= self.patience and self._reduce(epoch):
                self.cooldown_counter, self.wait = self.cooldown, 0

    def _reduce(self, epoch):
        optimizer = self.model.optimizer
        old = current_rate(optimizer, "ReduceLROnPlateau")
        if old <= np.float32(self.min_lr):      # compared as Keras compares: the floor in float32
            return False
        optimizer.learning_rate = max(old * self.factor, self.min_lr)
        if self.verbose > 0:
            say(f"\nEpoch {epoch + 1}: ReduceLROnPlateau reducing learning rate to {optimizer.learning_rate}.")
        return True
