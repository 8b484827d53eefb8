"""A running fingerprint of the batches an epoch trained on, so that a resumed ``fit`` can tell whether the batches
it skips are the ones the interrupted run took (``BackupAndRestore``): an order that differs would train some
samples twice and others never, silently."""
import hashlib

import numpy as np

from .data_adapter import Batch


class Fingerprint:
    """blake2b over each batch in turn: each of its arrays' dtype, shape and bytes (inputs, labels, weights).

    Nothing is kept but the digest; a batch of rows of the training arrays (``data_adapter.Batch``) has its rows
    read for it, one array at a time, and nothing is cached on the batch (an engine may still take the rows on its
    devices)."""

    def __init__(self):
        self._digest = hashlib.blake2b(digest_size=16)

    def add(self, batch):
        if isinstance(batch, Batch):
            rows = slice(batch.start, batch.start + batch.rows) if batch.order is None else batch.index
            batch = (source[rows] for source in batch.sources)
        for a in batch:
            a = np.ascontiguousarray(a)
            self._digest.update(f"{a.dtype.str}{a.shape};".encode())
            self._digest.update(a.reshape(-1).view(np.uint8))     # the bytes where they lie (any dtype)

    def hexdigest(self):
        return self._digest.hexdigest()
