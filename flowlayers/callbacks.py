"""Callbacks: Keras' protocol, driven without importing Keras.

Any object with Keras' hook methods works — ``keras.callbacks.EarlyStopping``,
``CSVLogger``, ``ModelCheckpoint``, ``TensorBoard`` and your own.
"""
import sys
import time

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

    def __init__(self):
        super().__init__()
        self.epoch, self.history = [], {}

    def on_epoch_end(self, epoch, logs=None):
        self.epoch.append(epoch)
        for k, v in (logs or {}).items():
            self.history.setdefault(k, []).append(v)


class ProgbarLogger(Callback):
    """A Keras-like progress bar: ``12/20 [=====>....] - 1s - loss: 0.41 - accuracy: 0.88``."""

    def __init__(self, verbose=1, stream=None):
        super().__init__()
        self.verbose, self.stream = verbose, stream or sys.stdout

    def on_epoch_begin(self, epoch, logs=None):
        self.start = time.perf_counter()
        if self.verbose:
            print(f"Epoch {epoch + 1}/{self.params.get('epochs', '?')}", file=self.stream)

    def on_train_batch_end(self, batch, logs=None):
        if self.verbose == 1:
            self._line(batch + 1, logs, end="\r")

    def on_epoch_end(self, epoch, logs=None):
        if self.verbose:
            self._line(self.params.get("steps") or 0, logs, end="\n")

    def _line(self, done, logs, end):
        total = self.params.get("steps") or done
        width = 30
        filled = int(width * done / total) if total else width
        bar = "=" * max(filled - 1, 0) + (">" if filled < width else "=") + "." * (width - filled)
        elapsed = time.perf_counter() - self.start
        metrics = " - ".join(f"{k}: {v:.4f}" for k, v in (logs or {}).items() if isinstance(v, float))
        print(f"{done}/{total} [{bar}] - {elapsed:.0f}s" + (f" - {metrics}" if metrics else ""), end=end,
              file=self.stream, flush=True)


class CallbackList:
    """Calls each hook on every callback that has it."""

    def __init__(self, callbacks, model, params):
        self.callbacks = list(callbacks)
        for cb in self.callbacks:
            if hasattr(cb, "set_model"):
                cb.set_model(model)
            if hasattr(cb, "set_params"):
                cb.set_params(params)

    def __getattr__(self, hook):
        if hook not in HOOKS:
            raise AttributeError(hook)

        def call(*args):
            for cb in self.callbacks:
                fn = getattr(cb, hook, None)
                if fn is not None:
                    fn(*args)
        return call
