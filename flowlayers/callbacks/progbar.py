"""ProgbarLogger: Keras 3's progress bar."""
import re
import sys
import time

import numpy as np

from .. import env, metrics
from .callback import Callback


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
