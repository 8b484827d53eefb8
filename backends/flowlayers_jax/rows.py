"""Rows of whole training arrays staged on the devices (``Rows`` feeds, ``Capabilities.takes_rows``): the
arrays of several steps' feeds, and inside a traced group of steps the row numbers made on the devices from an
epoch's order kept there, so that such a step transfers nothing."""
import jax
import jax.numpy as jnp
import numpy as np

from flowlayers.contract import Rows


def gathers_rows(platform, kept):
    """Whether a step fed rows of whole training arrays on ``platform`` gathers them from the arrays kept on its
    devices instead (``kept``: the arrays can be): on a GPU, where fed rows cross from pageable host memory in a
    transfer that waits, and a step that makes its rows on the device transfers nothing (bench/RESULTS_jax_gpu.md:
    run 7).  A CPU device reads fed rows where they are."""
    return kept and platform != "cpu"


def stacked_feeds(feeds, stage):
    """Several steps' feeds -> (per input its staged source or None, the arrays of rows or stacked feeds, per input
    which of those it takes, which of those are made on the devices, the first row of those).  Inputs taking the
    same rows share one array.  Rows that run through an epoch's order (``Rows.start``) are made on the devices
    from the order kept there (``made``: its entry is the staged order, None for the rows in their order) and the
    first row's number, so that such a step transfers nothing; other rows are host arrays of row numbers.
    ``stage(array)``: the whole array on the devices, or None where it is too large."""
    sources, arrays, uses, made, seen, start = [], [], [], [], {}, None
    for feed in feeds:
        source = stage(feed.source) if isinstance(feed, Rows) else None
        if source is not None:
            key = id(feed.index)
            if key not in seen:
                seen[key] = len(arrays)
                # one first row for all the rows made on the devices: runs from another row are sent as numbers
                runs = feed.start is not None and start in (None, feed.start)
                order = None if feed.order is None or not runs else stage(np.asarray(feed.order))
                if runs and (feed.order is None or order is not None):
                    arrays.append(order)
                    made.append(True)
                    start = feed.start
                else:
                    arrays.append(np.asarray(feed.index, np.int32))
                    made.append(False)
            uses.append(seen[key])
        else:
            uses.append(len(arrays))
            arrays.append(np.asarray(feed.gather() if isinstance(feed, Rows) else feed))
            made.append(False)
        sources.append(source)
    return sources, arrays, tuple(uses), tuple(made), start


def with_next_row(outs, made, first, steps, rows):
    """Inside a traced group of ``steps`` steps: its outputs, and where it made rows on the devices (``made``) the
    first row of the steps after (``BaseExecutable._run_steps``)."""
    return [*outs, first + steps * rows] if any(made) else outs


def made_rows(arrays, made, first, steps, rows):
    """Inside a traced step: ``stacked_feeds``' arrays with those ``made`` replaced by their steps' row numbers,
    (steps, rows), from row ``first`` (a device scalar) of the staged order (None: the rows in their order)."""
    def index(order):
        if order is None:
            return first + jnp.arange(steps * rows, dtype=jnp.int32)
        return jax.lax.dynamic_slice_in_dim(order, first, steps * rows).astype(jnp.int32)
    return [index(a).reshape(steps, rows) if m else a for a, m in zip(arrays, made)]


def rows_of(feeds):
    """The batch size of several steps' feeds."""
    first = feeds[0]
    return (first.index if isinstance(first, Rows) else np.asarray(first)).shape[1]
