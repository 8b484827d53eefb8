"""The metric: a state of float64 sums on the host, fed on its own or by the steps of ``fit`` and ``evaluate``.

A metric's state is a short vector of sums over examples (a running total and a count; true positives per
threshold; ...), and its result a function of them.  It is fed two ways:

- on its own, as in Keras: ``m.update_state(y_true, y_pred, sample_weight=None)`` computes the sums of a batch
  of host arrays in numpy (in the metric's dtype, summed in float64) and adds them;
- in a model (``compile(metrics=[...])``): ``statistics(y_true, y_pred)`` builds, in the step, one Blob per sum
  (the batch its first axis); the step returns each one's sum over the batch, added over the replicas, and
  ``add_sums`` adds them.  A sum over examples does not depend on how the batch is split, so the result is the
  same in every view, on every device and process count.

The same formula (``arrays``) builds both, so a metric means the same on its own and in a model.
"""
import functools
import re

import numpy as np

from .. import contract, dtypes
from ..errors import ConfigError, InputError
from ..framework import naming, step_trace
from ..framework.graph import as_blob, is_tensor
from ..ops import elementwise as ew
from . import arrays


def traceable(update):
    """``update_state`` that, in a traced step and given Blobs, records the metric's statistics instead
    (``_update_traced``); on host arrays it runs as written."""
    @functools.wraps(update)
    def update_state(self, *args, **kwargs):
        if _traced(*args, *kwargs.values()):
            return self._update_traced(*args, **kwargs)
        return update(self, *args, **kwargs)
    update_state.traceable = True
    return update_state


class Metric:
    """Keras 3's Metric: ``update_state``, ``result``, ``reset_state``, ``get_config`` / ``from_config``.

    A subclass gives ``_parts(y_true, y_pred, sample_weight)``: arrays whose whole sums are the state's entries
    (on the host with ``sample_weight``, in a step with None), and ``_result(state)``.  ``dtype``: the dtype the
    metric computes in (the arrays are cast to it, as Keras does); the sums are float64.
    """
    takes_predictions = True        # a metric of (y_true, y_pred), as compile(metrics=...) feeds it
    _direction = None               # "up" or "down": which way is better, for monitoring callbacks (as in Keras)

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        if "update_state" in cls.__dict__ and not getattr(cls.__dict__["update_state"], "traceable", False):
            cls.update_state = traceable(cls.__dict__["update_state"])

    def __init__(self, name=None, dtype=None):
        self.name = name or naming.unique_name(snake_case(type(self).__name__))     # Keras' auto_name
        self._dtype = _float_dtype(dtype, f"{type(self).__name__}(dtype)")
        self.step_outputs = 1       # how many sums of a step feed it (the last statistics() built)
        self._size = self._state_size()
        self.reset_state()

    @property
    def dtype(self):
        return self._dtype.name

    def _state_size(self):
        """The number of sums of the state, or None until the first batch says (Keras builds such metrics then)."""
        return None

    # The state ----------------------------------------------------------------------------------------------
    def reset_state(self):
        self._state = None if self._size is None else np.zeros(self._size)
        self._pending = []       # sums of steps, maybe still on the engine, read when the state is

    @property
    def sums(self):
        """The state: a float64 vector (None before the first batch of a metric that learns its size then)."""
        if self._pending:
            columns = list(zip(*self._pending))
            self._build(len(columns))
            self._state = self._state + np.array([contract.total(c) for c in columns])
            self._pending = []
        return None if self._state is None else self._state.copy()

    @sums.setter
    def sums(self, values):
        values = np.asarray(values, np.float64).reshape(-1)
        self._build(len(values))
        self._state, self._pending = values.copy(), []

    def _build(self, size):
        if self._size is None:
            self._size = size
            self._state = np.zeros(size)
        elif size != self._size:
            raise InputError(f"metric {self.name!r}: expected {self._size} statistics (as its first batch had), "
                             f"received {size}; use a new metric for data of another shape")

    def _add(self, sums):
        self._build(len(sums))
        self._state = self._state + np.asarray(sums, np.float64)

    # On its own -----------------------------------------------------------------------------------------------
    @traceable
    def update_state(self, y_true, y_pred, sample_weight=None):
        """Add a batch: ``y_true``, ``y_pred`` and ``sample_weight`` host arrays (numpy, or anything ``np.asarray``
        reads).  Inside a traced ``train_step``/``test_step``, on Blobs: the step returns the batch's sums, added
        after each step."""
        y_true, y_pred = self._host(y_true, "y_true"), self._host(y_pred, "y_pred")
        weight = None if sample_weight is None else self._host(sample_weight, "sample_weight")
        self._add([np.sum(p, dtype=np.float64) for p in self._parts(y_true, y_pred, weight)])

    def result(self):
        """The metric's value: a Python float, or a numpy array for a metric of several values (several
        thresholds, one per class)."""
        if step_trace.current() is not None:       # in a traced step: read after each step runs
            return step_trace.MetricResult(self)
        state = self.sums
        return 0.0 if state is None else _plain(self._result(state))

    def __call__(self, *args, **kwargs):
        self.update_state(*args, **kwargs)
        return self.result()

    def _host(self, value, what):
        if isinstance(value, arrays.Blob):
            raise InputError(f"metric {self.name!r}.update_state: {what} expected a host array (numpy), received "
                             f"Blob {value.name!r}; in a model, pass the metric to compile(metrics=[...])")
        try:
            return np.asarray(value, self._dtype.numpy)
        except (TypeError, ValueError) as e:
            raise InputError(f"metric {self.name!r}.update_state: {what} expected numbers, received "
                             f"{type(value).__name__}: {e}") from None

    # In a step ------------------------------------------------------------------------------------------------
    def _update_traced(self, y_true, y_pred, sample_weight=None):
        """``update_state`` in a traced step: this metric's statistics of the Blobs, and one count per example."""
        what = f"metric {self.name!r}.update_state"
        if sample_weight is not None:
            raise InputError(f"{what}: sample_weight in a traced step is not supported; expected None (weigh the "
                             f"loss instead), received {type(sample_weight).__name__}")
        y_true, y_pred = _traced_blob(y_true, "y_true", what), _traced_blob(y_pred, "y_pred", what)
        parts = self.statistics(y_true, y_pred)
        count = arrays.per_example(ew.fill_like(y_pred, 1.0, dtypes.float32))
        step_trace.require(what).update_metric(self, parts, count)

    def statistics(self, y_true, y_pred):
        """The Blobs whose sums over a batch the step returns for this metric (each keeps the batch as its first
        axis)."""
        parts = self._parts(y_true, arrays.cast(y_pred, self._dtype), None)
        self.step_outputs = len(parts)
        return parts

    def add_sums(self, sums, rows):
        """Add a step's sums of ``statistics`` over ``rows`` examples (or several steps' sums, stacked, over all
        their examples).  A sum may still be on the engine: it is read when the state is."""
        self._pending.append(self._step_sums(list(sums), rows))

    def _step_sums(self, sums, rows):
        """The state's entries from a step's sums (a subclass may add what the number of examples gives)."""
        return sums

    def deferred_result(self):
        """``result()`` as a ``Deferred`` (read on the host only when used) where it is one number."""
        if not self.scalar_result:
            return self.result()
        state, pending = self._state, list(self._pending)
        if not pending:
            return self.result()
        return Deferred(lambda: _plain(self._result(_resolved(state, pending))))

    @property
    def scalar_result(self):
        return True

    # Config ---------------------------------------------------------------------------------------------------
    def get_config(self):
        return {"name": self.name, "dtype": self.dtype}

    @classmethod
    def from_config(cls, config):
        return cls(**config)

    def __repr__(self):
        return f"<{type(self).__name__} name={self.name}>"

    def _parts(self, y_true, y_pred, sample_weight):
        raise NotImplementedError

    def _result(self, state):
        raise NotImplementedError


class Deferred:
    """A metric's value whose sums are still on the engine: ``float()`` reads them, once.  ``fit`` hands these to
    callbacks that keep epoch logs without reading them (History), so that epochs follow each other without the
    host waiting for the engine in between."""
    __slots__ = ("_read", "_value")

    def __init__(self, read):
        self._read, self._value = read, None

    def __float__(self):
        if self._value is None:
            self._value, self._read = float(self._read()), None
        return self._value

    def __format__(self, spec):
        return format(float(self), spec)

    def __repr__(self):
        return repr(float(self))


def _traced(*values):
    """Whether an update is made in a traced step, on Blobs (or Variables)."""
    return step_trace.current() is not None and any(is_tensor(v) for v in values)


def _traced_blob(value, what, where):
    value = as_blob(value)
    if not arrays.is_blob(value):
        raise InputError(f"{where}: {what} expected a Blob in a traced step, received {type(value).__name__}")
    return value


def snake_case(name):
    """Keras' ``to_snake_case``: ``AUC`` -> ``auc``, ``TruePositives`` -> ``true_positives``."""
    name = re.sub(r"(.)([A-Z][a-z]+)", r"\1_\2", name)
    return re.sub(r"([a-z])([A-Z])", r"\1_\2", name).lower()


def _resolved(state, pending):
    columns = [contract.total(c) for c in zip(*pending)]
    return (np.zeros(len(columns)) if state is None else state) + np.array(columns)


def _plain(value):
    value = np.asarray(value, np.float64)
    return float(value) if value.ndim == 0 else value


def _float_dtype(dtype, what):
    dtype = dtypes.as_dtype(dtype, what) if dtype is not None else dtypes.float32
    if not dtype.is_floating:
        raise ConfigError(f"{what}: expected a float dtype (float16, bfloat16, float32, float64), received {dtype}")
    return dtype


def divide_no_nan(a, b):
    """``a / b``, 0 where ``b`` is 0 (Keras' ``ops.divide_no_nan``), in float64."""
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    return np.divide(a, b, out=np.zeros(np.broadcast(a, b).shape), where=b != 0)


def samplewise(values, sample_weight, reduce_fn):
    """Keras' ``reduce_to_samplewise_values``: one value per example, weighed, and the weights per example."""
    if sample_weight is not None:
        values, sample_weight = arrays.same_rank(values, sample_weight)
        weight_ndim, values_ndim = sample_weight.ndim, values.ndim
        if values_ndim > weight_ndim:
            values = reduce_fn(values, axis=tuple(range(weight_ndim, values_ndim)))
        sample_weight = np.broadcast_to(sample_weight, values.shape)
        values = values * sample_weight
        if weight_ndim > 1:
            sample_weight = reduce_fn(sample_weight, axis=tuple(range(1, weight_ndim)))
    if values.ndim > 1:
        values = reduce_fn(values, axis=tuple(range(1, values.ndim)))
    return values, sample_weight


class Mean(Metric):
    """The (weighted) mean of values: ``m.update_state(values, sample_weight=None)``.  In ``fit`` the loss is one."""
    takes_predictions = False

    def __init__(self, name="mean", dtype=None):
        super().__init__(name, dtype)

    def _state_size(self):
        return 2      # total, count

    def update_state(self, values, sample_weight=None):
        values = self._host(values, "values")
        weight = None if sample_weight is None else self._host(sample_weight, "sample_weight")
        values, weight = samplewise(values, weight, np.mean)
        count = np.sum(weight, dtype=np.float64) if weight is not None else (values.shape[0] if values.ndim else 1)
        self._add([np.sum(values, dtype=np.float64), count])

    def _step_sums(self, sums, rows):
        return [sums[0], rows]

    def _update_traced(self, values, sample_weight=None):
        self._update_values_traced(values, sample_weight, arrays.mean)

    def _update_values_traced(self, values, sample_weight, reduce_fn):
        """``update_state(values)`` in a traced step: each example's value (reduced over its other axes) and a
        count, weighed by a number or by a Blob of one weight per example.  A scalar Blob counts once per replica
        in the mirrored view (the mean of the replicas' values)."""
        what = f"metric {self.name!r}.update_state"
        trace = step_trace.require(what)
        values = _traced_blob(values, "values", what)
        if values.ndim == 0:        # one value (Keras counts it once): the batch mean of what it averages
            if not (sample_weight is None or isinstance(sample_weight, (int, float))) or isinstance(sample_weight,
                                                                                                    bool):
                raise InputError(f"{what}: sample_weight of a scalar value expected a number or None, received "
                                 f"{type(sample_weight).__name__}")
            values = arrays.cast(trace.per_example(values), self._dtype)
            trace.update_metric(self, [values], ew.fill_like(values, 1.0, self._dtype),
                                once=1.0 if sample_weight is None else float(sample_weight))
            return
        values = arrays.cast(values, self._dtype)
        if values.ndim > 1:
            values = reduce_fn(values, axis=list(range(1, values.ndim)))
        count = ew.fill_like(values, 1.0, self._dtype)
        if sample_weight is not None:
            weight = sample_weight if isinstance(sample_weight, (int, float)) and not isinstance(
                sample_weight, bool) else arrays.cast(_traced_blob(sample_weight, "sample_weight", what), self._dtype)
            if not isinstance(weight, (int, float)) and weight.shape != values.shape:
                raise InputError(f"{what}: sample_weight expected a number or a Blob of shape {values.shape} (one "
                                 f"weight per value), received shape {weight.shape}")
            values, count = values * weight, count * weight
        trace.update_metric(self, [values], count)

    def _result(self, state):
        return divide_no_nan(state[0], state[1])

    def statistics(self, y_true, y_pred):
        raise not_of_predictions(self)


class Sum(Metric):
    """The (weighted) sum of values: ``m.update_state(values, sample_weight=None)``."""
    takes_predictions = False

    def __init__(self, name="sum", dtype=None):
        super().__init__(name, dtype)

    def _state_size(self):
        return 1

    def update_state(self, values, sample_weight=None):
        values = self._host(values, "values")
        weight = None if sample_weight is None else self._host(sample_weight, "sample_weight")
        self._add([np.sum(samplewise(values, weight, np.sum)[0], dtype=np.float64)])

    def _result(self, state):
        return state[0]

    def _update_traced(self, values, sample_weight=None):
        Mean._update_values_traced(self, values, sample_weight, arrays.total)

    statistics = Mean.statistics


def not_of_predictions(metric):
    return ConfigError(f"metric {metric.name!r} ({type(metric).__name__}) takes values (update_state(values)), not "
                       f"labels and predictions; in compile(metrics=[...]) give a metric of predictions, or "
                       f"MeanMetricWrapper(fn) for a function of (y_true, y_pred)")


class MeanMetricWrapper(Mean):
    """The mean over examples of ``fn(y_true, y_pred, **kwargs)``, a function of one value per example (or per
    entry: an example's entries are averaged first).  In a model ``fn`` receives Blobs: write it with
    ``flowlayers`` ops (those of Blobs, their operators) to use it there too."""
    takes_predictions = True

    def __init__(self, fn, name=None, dtype=None, **kwargs):
        if not callable(fn):
            raise ConfigError(f"MeanMetricWrapper: fn expected a function of (y_true, y_pred), received {fn!r}")
        self._fn, self._fn_kwargs = fn, kwargs
        super().__init__(name, dtype)

    def update_state(self, y_true, y_pred, sample_weight=None):
        y_pred = self._host(y_pred, "y_pred")
        super().update_state(self._fn(self._host(y_true, "y_true"), y_pred, **self._fn_kwargs), sample_weight)

    _update_traced = Metric._update_traced

    def statistics(self, y_true, y_pred):
        self.step_outputs = 1
        values = self._fn(y_true, arrays.cast(y_pred, self._dtype), **self._fn_kwargs)
        return [arrays.cast(arrays.per_example(values), self._dtype)]

    def get_config(self):
        return {**super().get_config(), "fn": self._fn, **self._fn_kwargs}


class Wrapped(MeanMetricWrapper):
    """A Keras metric class that is the mean of one of flowlayers' functions (``fn``): its config is its own
    arguments."""
    fn = None

    def __init__(self, name, dtype=None, **kwargs):
        super().__init__(type(self).fn, name, dtype, **kwargs)

    def get_config(self):
        return {"name": self.name, "dtype": self.dtype, **self._fn_kwargs}
