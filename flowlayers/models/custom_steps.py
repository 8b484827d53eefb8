"""A model's own ``train_step`` / ``test_step`` / ``predict_step`` (Keras 3's contract), traced once and compiled.

``fit`` hands the step placeholders shaped like one element of the data (``x``, ``(x, y)`` or ``(x, y,
sample_weight)``, lists and dicts kept, as Keras hands ``data``) and calls it under ``step_trace.tracing``; what it
recorded becomes compiled steps (``Stages``):

- each ``optimizer.apply`` is a stage: a Program minimising that loss's mean over the batch, training that apply's
  variables with that optimizer.  The stages of one batch run in order, so a later stage reads the variables as
  the earlier ones left them (keras.io's GAN: the discriminator trains, then the generator through it);
- every other value the step returns or feeds a metric is computed by the first stage that reads the variables as
  the step read them (a Blob made before an apply that trains a variable it reads is computed before that apply);
  where none can, it is refused by name.  A value read after the last apply that it changed takes one more
  Program, without a loss.

Values are per-example Blobs summed over the batch (exact in every view); a scalar Blob is each replica's in the
mirrored view, averaged over the replicas.
"""
import dataclasses

import numpy as np

from .. import dtypes
from ..errors import GraphError, InputError
from ..framework import naming, step_trace
from ..framework.blob import Blob
from ..framework.compiled import Compiled
from ..framework.graph import topo_sort
from ..framework.program import build as build_program
from ..ops import elementwise as ew, source
from ..ops.reduce import reduce_mean


def pack(x, y=None, sample_weight=None):
    """Keras' ``pack_x_y_sample_weight``: the element a step receives."""
    if y is None and sample_weight is None:
        return (x,) if isinstance(x, (list, tuple)) else x
    return (x, y) if sample_weight is None else (x, y, sample_weight)


def leaves(tree):
    """The arrays of a nested element (tuples, lists and dicts kept in order; None left out)."""
    if isinstance(tree, dict):
        return [a for k in tree for a in leaves(tree[k])]
    if isinstance(tree, (list, tuple)):
        return [a for item in tree for a in leaves(item)]
    return [] if tree is None else [tree]


def rebuilt(tree, values):
    """``tree`` with its leaves replaced, in order, by ``values`` (an iterator)."""
    if isinstance(tree, dict):
        return {k: rebuilt(v, values) for k, v in tree.items()}
    if isinstance(tree, (list, tuple)):
        return type(tree)(rebuilt(item, values) for item in tree)
    return None if tree is None else next(values)


def feed_dtype(array, what):
    """The placeholder dtype of a data array: floats as float32 (Keras' floatx), integers as int32."""
    kind = np.asarray(array).dtype.kind
    if kind == "f":
        return dtypes.float32
    if kind in "iu":
        return dtypes.int32
    raise InputError(f"{what}: expected arrays of numbers, received dtype {np.asarray(array).dtype}")


def signature(arrays):
    """What a traced step depends on in a batch: each array's non-batch shape and dtype."""
    return tuple((np.shape(a)[1:], feed_dtype(a, "data").name) for a in arrays)


class Stages:
    """A traced step compiled: its Programs in order, what each returns, and how the logs are read."""

    def __init__(self, model, phase, element, placement):
        self.model, self.phase, self.placement = model, phase, placement
        what = f"Model {model.name!r}.{_STEP[phase]}"
        arrays = leaves(element)
        self.placeholders = [source.placeholder((None,) + tuple(np.shape(a)[1:]), feed_dtype(a, what),
                                                naming.unique_name(f"{model.name}/data"))
                             for a in arrays]
        trace = step_trace.Trace(phase, what, self.placeholders)
        with step_trace.tracing(trace):
            self.result = getattr(model, _STEP[phase])(rebuilt(element, iter(self.placeholders)))
        self.trace, self.what = trace, what
        if phase == "predict":
            self._predict_program()
        else:
            self._stage_programs()

    # Building -------------------------------------------------------------------------------------------------
    def _predict_program(self):
        self.outputs = leaves(self.result)
        if not self.outputs or not all(isinstance(b, Blob) and b.ndim for b in self.outputs):
            raise GraphError(f"{self.what}: expected to return Blobs with a batch axis (or a list or dict of them), "
                             f"received {self.result!r}")
        program = build_program(self.placeholders, self.outputs, ["numpy"] * len(self.outputs), "predict",
                                name=self.what)
        self.programs = [(Compiled(program, self.placement), None)]

    def _stage_programs(self):
        updates = self.trace.updates
        boundaries = [u.boundary for u in updates]
        # groups of Blobs computed together: each metric update's sums and count, each returned Blob's
        groups = [u.sums + [u.count] for u in self.trace.metric_updates]
        if not isinstance(self.result, dict):
            raise GraphError(f"{self.what}: expected to return a dict of logs (name -> value), received "
                             f"{type(self.result).__name__}")
        self.logs = {}
        for key, value in self.result.items():
            if isinstance(value, Blob):
                value = self.trace.per_example(value)
                values = reduce_mean(value, axis=list(range(1, value.ndim))) if value.ndim > 1 else value
                self.logs[key] = len(groups)
                groups.append([values, ew.fill_like(values, 1.0, dtypes.float32)])
            elif not isinstance(value, (step_trace.MetricResult, int, float, np.number)) or isinstance(value, bool):
                raise GraphError(f"{self.what}: log {key!r} expected a Blob, a metric's result() or a number, "
                                 f"received {type(value).__name__} {value!r}")
        losses = [_per_example(self.trace.per_example(u.loss)) for u in updates]
        for k, (update, loss) in enumerate(zip(updates, losses)):
            problem = _stale(loss, k, updates, boundaries)
            if problem is not None:
                raise GraphError(f"{self.what}: the loss Blob {update.loss.name!r} applied by optimizer.apply #{k + 1} "
                                 f"reads {problem}; expected it computed after the applies before it (compute it again "
                                 f"after them, as keras.io's GAN does)")
        where = []
        for group in groups:
            fits = [j for j in range(len(updates) + 1)
                    if all(_stale(b, j, updates, boundaries) is None for b in group)]
            if not fits:
                problem = _stale(group[0], len(updates), updates, boundaries)
                raise GraphError(f"{self.what}: Blob {group[0].name!r} reads {problem}, and variables that another "
                                 f"apply changed; expected each value to read the variables as one stage sees them")
            where.append(fits[0])
        self.programs, self.placed = [], [[] for _ in range(len(updates) + 1)]
        for g, j in enumerate(where):
            self.placed[j].append(g)
        self.at = {}      # group -> (program, first output)
        for j in range(len(updates) + 1):
            if j == len(updates) and not self.placed[j] and updates:
                break
            outputs = []
            for g in self.placed[j]:
                self.at[g] = (len(self.programs), len(outputs))
                outputs += groups[g]
            update = updates[j] if j < len(updates) else None
            program = build_program(self.placeholders, outputs, ["sum"] * len(outputs), self.phase,
                                    loss=None if update is None else losses[j],
                                    optimizer=None if update is None else update.optimizer, name=f"{self.what}#{j + 1}",
                                    trained=None if update is None else update.variables)
            # state a layer call updates (moving statistics) is assigned by the stage it was called in, once
            program = dataclasses.replace(program, updates=tuple(
                (var, b) for var, b in program.updates if _window(b.node, boundaries) == j))
            self.programs.append((Compiled(program, self.placement), None if update is None else update.optimizer))
        self.groups = groups

    # Running --------------------------------------------------------------------------------------------------
    def run(self, arrays):
        """One batch through every stage in order: for train and test steps the logs (metrics updated), for a
        predict step the outputs' arrays."""
        feeds = [np.asarray(a, b.dtype.numpy) for a, b in zip(arrays, self.placeholders)]
        results = [compiled.run(feeds, optimizer) for compiled, optimizer in self.programs]
        if self.phase == "predict":
            return results[0]
        sums = [[results[p][i + k] for k in range(len(self.groups[g]))] for g, (p, i) in sorted(self.at.items())]
        for update, values in zip(self.trace.metric_updates, sums):
            if update.once is not None:     # one value: the mean of its sums, weighing once
                count = float(np.asarray(values[-1], np.float64))
                update.metric.add_sums([update.once * float(np.asarray(v, np.float64)) / count
                                        for v in values[:-1]], update.once)
            else:
                update.metric.add_sums(values[:-1], values[-1])
        logs = {}
        for key, value in self.result.items():
            if isinstance(value, step_trace.MetricResult):
                logs[key] = value.metric.result()
            elif isinstance(value, Blob):
                total, count = sums[self.logs[key]]
                logs[key] = float(np.asarray(total, np.float64) / np.asarray(count, np.float64))
            else:
                logs[key] = float(value)
        return logs


_STEP = {"train": "train_step", "eval": "test_step", "predict": "predict_step"}


def _per_example(loss):
    """A loss Blob as one value per example (the mean of each example's entries); a scalar stays one."""
    return reduce_mean(loss, axis=list(range(1, loss.ndim))) if loss.ndim > 1 else loss


def _window(node, boundaries):
    """How many applies were recorded before ``node`` was made."""
    return sum(1 for b in boundaries if b <= node.serial)


def _stale(blob, j, updates, boundaries):
    """Why ``blob`` cannot be computed by stage ``j`` (which sees the updates before it): the variable it read
    before or after an update stage ``j`` sees differently, named; None where it can."""
    for node in topo_sort([blob]):
        if node.op.kind != "variable":
            continue
        read_after = _window(node, boundaries)      # the updates made before it was read
        for u in range(min(read_after, j), max(read_after, j)):
            if any(v is node.variable for v in updates[u].variables):
                when = "before" if read_after <= u else "after"
                return f"variable {node.variable.path!r} as it was {when} optimizer.apply #{u + 1} updated it"
    return None
