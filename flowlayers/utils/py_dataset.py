"""PyDataset (and its older name Sequence): batches by index, Keras 3's base class for data made in Python."""
from ..errors import ConfigError


class PyDataset:
    """Give ``__len__`` (batches per epoch) and ``__getitem__(i)`` (batch ``i``: ``x``, ``(x, y)`` or
    ``(x, y, sample_weight)``); ``on_epoch_begin``/``on_epoch_end`` run around each epoch.  ``workers`` > 1: ``fit``
    makes up to ``max_queue_size`` batches ahead in that many threads (the order is kept), for Keras' PyDataset
    too; ``use_multiprocessing=True`` (processes) is refused by name."""

    def __init__(self, workers=1, use_multiprocessing=False, max_queue_size=10):
        for name, value in (("workers", workers), ("max_queue_size", max_queue_size)):
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ConfigError(f"{type(self).__name__}: {name} expected an int >= 1, received {value!r}")
        if use_multiprocessing:
            raise ConfigError(f"{type(self).__name__}: use_multiprocessing=True is not supported (batches are made "
                              f"in threads); expected use_multiprocessing=False, with workers > 1 for threads")
        self._workers, self._use_multiprocessing, self._max_queue_size = workers, use_multiprocessing, max_queue_size

    @property
    def workers(self):
        return self._workers

    @property
    def use_multiprocessing(self):
        return self._use_multiprocessing

    @property
    def max_queue_size(self):
        return self._max_queue_size

    @property
    def num_batches(self):
        return len(self) if hasattr(type(self), "__len__") else None

    def __getitem__(self, index):
        raise NotImplementedError(f"{type(self).__name__}: a PyDataset gives __getitem__(index) -> a batch")

    def on_epoch_begin(self):
        pass

    def on_epoch_end(self):
        pass


Sequence = PyDataset
