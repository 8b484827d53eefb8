"""CSVLogger: one row of epoch logs per epoch, in a CSV file (Keras 3's callback and file layout)."""
import csv
import os

import numpy as np

from .. import env, metrics
from .callback import Callback


class CSVLogger(Callback):
    """Write ``epoch`` and the sorted log names as columns of ``filename``; ``append`` continues a file (its header
    kept), e.g. a resumed run.  Without validation logs in the first epoch, ``val_`` columns are reserved as Keras
    reserves them.  Only the process that speaks for a job writes."""

    def __init__(self, filename, separator=",", append=False):
        super().__init__()
        self.filename, self.sep, self.append = os.fspath(filename), separator, append
        self.csv_file, self.writer, self.keys = None, None, None

    def on_train_begin(self, logs=None):
        self._close()
        self.writer, self.keys = None, None
        if not env.speaks():
            return
        header = not (self.append and os.path.exists(self.filename) and os.path.getsize(self.filename))
        self.csv_file = open(self.filename, "a" if self.append else "w", newline="")
        self._header = header

    def on_epoch_end(self, epoch, logs=None):
        if self.csv_file is None:
            return
        logs = logs or {}
        if self.keys is None:
            self.keys = sorted(logs)
            if self.keys and not any(k.startswith("val_") for k in self.keys):
                self.keys += [f"val_{k}" for k in self.keys]
        if self.writer is None:
            dialect = type("Dialect", (csv.excel,), {"delimiter": self.sep})
            self.writer = csv.DictWriter(self.csv_file, fieldnames=["epoch"] + self.keys, dialect=dialect)
            if self._header:
                self.writer.writeheader()
        self.writer.writerow({"epoch": epoch, **{k: _cell(logs.get(k, "NA")) for k in self.keys}})
        self.csv_file.flush()

    def on_train_end(self, logs=None):
        self._close()
        self.writer = None

    def _close(self):
        if self.csv_file is not None and not self.csv_file.closed:
            self.csv_file.close()
        self.csv_file = None


def _cell(value):
    if isinstance(value, metrics.Deferred):
        return float(value)
    if isinstance(value, str) or (isinstance(value, np.ndarray) and value.ndim == 0):
        return value
    if isinstance(value, (list, tuple, np.ndarray)):
        return f"[{', '.join(map(str, value))}]"
    return value
