"""What a custom step records while it is traced: Keras 3's ``train_step`` / ``test_step`` / ``predict_step``,
run once on placeholders (as a OneFlow job function is), and ``flow.GradientTape``.

A step is not run eagerly: ``fit`` calls ``model.train_step(data)`` once on symbolic data under ``tracing(trace)``
and compiles what it recorded.  Inside, ``tape.gradient(loss, variables)`` gives ``Gradient`` markers (the gradient
of the loss's mean over the batch with respect to a variable, taken by the step the engine compiles), an optimizer's
``apply`` records an ``Update`` (which closes a stage: the stages of one batch run in order, each a compiled step),
and a metric's ``update_state`` on Blobs records the Blobs whose sums the step returns.  What cannot be planned
(arithmetic on a gradient, a gradient outside a traced step) is refused by name.
"""
import contextlib

from ..errors import GraphError
from .blob import Blob
from .graph import as_blob, next_serial, topo_sort
from .variable import Variable


class Update:
    """One ``optimizer.apply``: ``optimizer`` trains ``variables`` on ``loss`` (a Blob whose mean over the batch is
    minimised); ``boundary``: the serial of the first node made after it (nodes before it read the variables as
    they were before this update)."""

    def __init__(self, optimizer, loss, variables, boundary):
        self.optimizer, self.loss, self.variables, self.boundary = optimizer, loss, variables, boundary


class MetricUpdate:
    """One ``metric.update_state`` on Blobs: ``sums`` (Blobs summed over the batch: the metric's statistics) and
    ``count`` (a Blob of ones, one per value the metric averages over).  ``once``: the update is of one value (a
    scalar, as Keras' ``update_state(loss)``), the mean of the sums over the count, weighing ``once``."""

    def __init__(self, metric, sums, count, once=None):
        self.metric, self.sums, self.count, self.once = metric, list(sums), count, once


class MetricResult:
    """``metric.result()`` inside a traced step: read on the host once the step's sums are added."""

    def __init__(self, metric):
        self.metric = metric

    def __repr__(self):
        return f"<result of metric {self.metric.name!r}, read after each step>"


class Trace:
    """What one traced step recorded: the optimizer updates in order, the metric updates; ``feeds``: the
    placeholders of its data, from which the values it computes (and its ``add_loss`` terms) are made."""

    def __init__(self, phase, name, feeds=()):
        self.phase, self.name = phase, name
        self.feeds = {id(x.node) for x in feeds}       # the step's placeholders (its data)
        self.updates, self.metric_updates = [], []
        self._examples = {}     # id of a scalar mean -> (the scalar, its Blob of one value per example)

    def mean_of(self, per_example, scalar):
        """Record that ``scalar`` is the batch mean of ``per_example`` (``compute_loss``'s loss): where it is
        minimised, logged or averaged, the per-example values are summed instead (exact in every view)."""
        self._examples[id(scalar)] = (scalar, per_example)

    def per_example(self, blob):
        """The per-example Blob whose batch mean ``blob`` is, else ``blob``."""
        known = self._examples.get(id(blob))
        return known[1] if known is not None and known[0] is blob else blob

    def apply(self, optimizer, pairs, what):
        """Record ``optimizer`` applying ``pairs`` ((Gradient or None, Variable), ...); a None gradient (a variable
        the loss does not read, as TensorFlow's tape gives it) is skipped, as Keras skips it."""
        if self.phase != "train":
            raise GraphError(f"{what}: expected in a train_step, received a call in {self.name!r} (a {self.phase} "
                             f"step updates no variable)")
        pairs = [(g, v) for g, v in pairs if g is not None]
        if not pairs:
            raise GraphError(f"{what}: expected at least one gradient, received none (every gradient was None: the "
                             f"loss reads none of the variables)")
        loss, variables = None, []
        for grad, var in pairs:
            if not isinstance(grad, Gradient):
                raise GraphError(f"{what}: expected gradients from flow.GradientTape().gradient(loss, variables), "
                                 f"received {type(grad).__name__} for variable {getattr(var, 'path', var)!r}; a "
                                 f"computed gradient cannot be planned (clip with the optimizer's clipnorm, "
                                 f"clipvalue or global_clipnorm)")
            if not isinstance(var, Variable) or var is not grad.source:
                raise GraphError(f"{what}: the gradient of variable {grad.source.path!r} was given for "
                                 f"{getattr(var, 'path', var)!r}; expected each gradient beside its own variable")
            if loss is not None and grad.target is not loss:
                raise GraphError(f"{what}: expected the gradients of one loss, received gradients of Blob "
                                 f"{loss.name!r} and of Blob {grad.target.name!r}; add the losses before "
                                 f"tape.gradient, or apply each with its own optimizer.apply")
            if any(var is v for v in variables):
                raise GraphError(f"{what}: variable {var.path!r} is given twice; expected each variable once")
            loss = grad.target
            variables.append(var)
        self.updates.append(Update(optimizer, loss, variables, next_serial()))

    def update_metric(self, metric, sums, count, once=None):
        self.metric_updates.append(MetricUpdate(metric, sums, count, once))


_traces = []


@contextlib.contextmanager
def tracing(trace):
    """Record into ``trace`` what the step called inside does."""
    _traces.append(trace)
    try:
        yield trace
    finally:
        _traces.pop()


def current():
    """The trace being recorded, or None."""
    return _traces[-1] if _traces else None


def require(what):
    """The trace being recorded; outside one, ``what`` (a call that only a traced step can make) is refused."""
    if not _traces:
        raise GraphError(f"{what}: expected inside a model's train_step, test_step or predict_step, which fit, "
                         f"evaluate and predict trace on symbolic data; flowlayers runs no eager step")
    return _traces[-1]


class Gradient:
    """The gradient of ``target``'s mean over the batch with respect to Variable ``source``: a marker that an
    optimizer's ``apply`` takes.  It has no value while the step is traced; arithmetic on it is refused by name."""
    __slots__ = ("target", "source")

    def __init__(self, target, source):
        self.target, self.source = target, source

    def __repr__(self):
        return f"<gradient of Blob {self.target.name!r} with respect to variable {self.source.path!r}>"

    def _refuse(self, *args, **kwargs):
        raise GraphError(f"{self!r}: arithmetic on a gradient cannot be planned (the engine takes the gradient "
                         f"inside the compiled step); expected it handed as it is to optimizer.apply or "
                         f"apply_gradients (clip with the optimizer's clipnorm, clipvalue or global_clipnorm)")

    __add__ = __radd__ = __sub__ = __rsub__ = __mul__ = __rmul__ = __truediv__ = __rtruediv__ = _refuse
    __neg__ = __pow__ = __matmul__ = __rmatmul__ = __array__ = __float__ = __bool__ = __getitem__ = _refuse
    __hash__ = object.__hash__


class GradientTape:
    """TensorFlow's ``tf.GradientTape`` API for a custom ``train_step`` (Keras 3's TensorFlow form)::

        with flow.GradientTape() as tape:
            y_pred = self(x, training=True)
            loss = self.compute_loss(y=y, y_pred=y_pred)
        grads = tape.gradient(loss, self.trainable_variables)
        self.optimizer.apply(grads, self.trainable_variables)

    The gradients are markers of what the compiled step computes (of the loss's mean over the whole batch, in
    every view); every variable is watched.  ``persistent=False`` allows one ``gradient`` call, as TensorFlow does.
    """

    def __init__(self, persistent=False, watch_accessed_variables=True):
        if not watch_accessed_variables:
            raise GraphError("flow.GradientTape(watch_accessed_variables=False): not supported (every variable the "
                             "loss reads is watched); expected True")
        self.persistent, self._used = bool(persistent), False

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False

    def watch(self, tensor):
        """Variables are watched already; a Blob's gradient is not returned by a train_step (see flow.watch_diff)."""
        for x in tensor if isinstance(tensor, (list, tuple)) else [tensor]:
            if not isinstance(x, Variable):
                raise GraphError(f"flow.GradientTape.watch: expected Variables, received {type(x).__name__}; "
                                 f"gradients are taken with respect to variables only")

    def gradient(self, target, sources, output_gradients=None, unconnected_gradients="none"):
        what = "flow.GradientTape.gradient"
        require(what)
        if self._used and not self.persistent:
            raise GraphError(f"{what}: a non-persistent tape gives gradients once; expected "
                             f"flow.GradientTape(persistent=True) for a second call")
        self._used = True
        if output_gradients is not None:
            raise GraphError(f"{what}: output_gradients is not supported; expected None")
        if unconnected_gradients not in ("none", "zero"):
            raise GraphError(f"{what}: unconnected_gradients expected 'none' or 'zero', received "
                             f"{unconnected_gradients!r}")
        target = as_blob(target)
        if not isinstance(target, Blob) or not target.dtype.is_floating:
            raise GraphError(f"{what}: target expected a floating Blob (the loss), received "
                             f"{getattr(target, 'dtype', type(target).__name__)}")
        read = {id(n.variable) for n in topo_sort([target]) if n.op.kind == "variable"}

        def one(source):
            if not isinstance(source, Variable):
                raise GraphError(f"{what}: sources expected Variables (e.g. self.trainable_variables), received "
                                 f"{type(source).__name__}")
            if id(source) not in read and unconnected_gradients == "none":
                return None
            return Gradient(target, source)

        if isinstance(sources, dict):
            return {k: one(v) for k, v in sources.items()}
        if isinstance(sources, (list, tuple)):
            return [one(s) for s in sources]
        return one(sources)
