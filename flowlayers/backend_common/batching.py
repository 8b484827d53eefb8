"""Splitting a host batch: over replicas (the mirrored view) and into micro-batches."""
import numpy as np


def micro_batch_bounds(rows, n):
    """Where ``n`` micro-batches of ``rows`` rows (a number, or an engine's scalar) start and end: runs of
    consecutive rows whose sizes differ by one at most (some empty where there are fewer rows than ``n``)."""
    return [rows * k // n for k in range(n + 1)]


def replica_rows(feed, n):
    """A host batch's rows for each of ``n`` replicas, in order (the first ones get one more where ``n`` does not
    divide the batch): what the mirrored view feeds each device."""
    return np.array_split(np.asarray(feed), n) if n > 1 else [np.asarray(feed)]


def micro_batches(feeds, n):
    """Host feeds -> ``n`` lists of feeds, each a run of consecutive rows (sizes differ by one at most); a batch of
    fewer rows runs as one micro-batch per row (the sum of the gradients is the same)."""
    if n == 1 or not feeds or not np.ndim(feeds[0]):
        return [list(feeds)]
    n = min(n, len(feeds[0]))
    return [list(chunk) for chunk in zip(*[np.array_split(np.asarray(f), n) for f in feeds])]
