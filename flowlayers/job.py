"""Job functions: OneFlow's face.  ``@flow.global_function`` turns a function of Placeholders
into a step that takes numpy arrays and returns numpy arrays.

The graph is built at the first call (after ``flow.config`` is set), in the
view of ``function_config`` or the one in force, and rebuilt if the view,
device count or mesh changes.  Weights are shared between job functions by
layer name.
"""
import contextlib
import inspect
import typing

import numpy as np

from . import dtypes, engine, losses, mixed_precision, optimizers, regularizers, scope, settings
from .errors import ConfigError, DTypeError, GraphError, InputError, describe_shape
from .framework.blob import Blob
from .framework.compiled import Compiled
from .framework.program import build as build_program
from .inputs import check_range, index_ranges
from .layers import base as layer_base
from .ops import source
from .parallel import report
from .typing import Callback, ListListNumpy, ListNumpy, Numpy, _Placeholder

_builds = []
_registered = []


class function_config:  # noqa: N801 - OneFlow's name
    """Per-job settings: ``default_logical_view(flow.scope.mirrored_view())``, ``default_data_type(flow.float)``,
    ``enable_auto_mixed_precision(True)``."""

    def __init__(self):
        self.view = None
        self.data_type = dtypes.float32
        self.auto_mixed_precision = False

    def enable_auto_mixed_precision(self, val=True):
        """OneFlow's automatic mixed precision: the job's layers take the ``mixed_float16`` policy (they compute in
        float16 and keep float32 variables, with Keras' casts: normalisation statistics in float32), the loss it
        minimises is float32 and its optimizer scales the loss dynamically (a ``LossScaleOptimizer``), as a Keras
        model under ``mixed_float16`` trains."""
        if not isinstance(val, bool):
            raise ConfigError(f"function_config().enable_auto_mixed_precision(val): expected True or False, "
                              f"received {val!r}")
        self.auto_mixed_precision = val

    def default_logical_view(self, view):
        self.view = scope.as_view_name(view, "function_config().default_logical_view(view)")

    default_distribute_strategy = default_logical_view   # OneFlow 0.2's name

    def default_data_type(self, dtype):
        dtype = dtypes.as_dtype(dtype, "function_config().default_data_type(dtype)")
        if not dtype.is_floating:
            raise DTypeError(f"function_config().default_data_type: expected a floating dtype, received {dtype}")
        self.data_type = dtype


class _Build:
    """What one job function's body declares while it runs: its loss and optimizer."""

    def __init__(self, job_type):
        self.job_type, self.loss, self.rule = job_type, None, None
        self.watched = []       # (blob, handler) of flow.watch
        self.watched_diff = []  # (blob, handler) of flow.watch_diff

    def set_objective(self, loss, rule):
        if self.job_type != "train":
            raise GraphError(f"minimize(): expected inside a job function of type='train', received one of "
                             f"type={self.job_type!r}")
        if self.loss is not None:
            raise GraphError("minimize(): expected once per job function, received a second call")
        self.loss, self.rule = loss, rule


def current_build():
    if not _builds:
        raise GraphError("minimize(): expected inside a function decorated with @flow.global_function(type='train')")
    return _builds[-1]


def global_function(type="predict", function_config=None):  # noqa: A002 - OneFlow's argument name
    if type not in ("train", "predict"):
        raise GraphError(f"@flow.global_function: type expected 'train' or 'predict', received {type!r}")

    def decorate(fn):
        job = JobFunction(fn, type, function_config)
        _registered.append(job)
        return job
    return decorate


class JobFunction:
    def __init__(self, fn, job_type, cfg):
        self.fn, self.job_type, self.config = fn, job_type, cfg
        self.__name__ = fn.__name__
        self.__doc__ = fn.__doc__
        self._compiled = None   # (placement, program, Compiled, return structure, index ranges of inputs)
        sig = inspect.signature(fn)
        hints = typing.get_type_hints(fn) if not _has_string_annotations(fn) else {}
        self.params = []
        for name, p in sig.parameters.items():
            ann = hints.get(name, p.annotation)
            if not isinstance(ann, _Placeholder):
                raise GraphError(f"job function {fn.__name__!r}: argument {name!r} expected an annotation "
                                 f"tp.Numpy.Placeholder(shape, dtype) or tp.ListNumpy.Placeholder(...), received "
                                 f"{ann!r}")
            self.params.append((name, ann))
        self.returns = sig.return_annotation
        self.asynchronous = isinstance(self.returns, Callback)
        if self.asynchronous:
            self.returns = self.returns.inner

    @property
    def view(self):
        return (self.config and self.config.view) or settings.view()

    @property
    def step(self):
        """Training steps this train job has taken (restored by ``flow.train.CheckPoint().load``): where a loop
        resumes after a crash.  0 for a job not built yet or of type 'predict'."""
        rule = self._compiled[1].optimizer if self._compiled else None
        return rule.iterations if rule is not None else 0

    def build(self):
        """Build the graph and compile it for the runtime in force (also done by the first call)."""
        view = self.view
        placement = engine.placement(view)
        if self._compiled and self._compiled[0] == placement:
            return self._compiled
        try:
            engine.runtime(placement)
        except ConfigError as e:
            raise ConfigError(f"job function {self.__name__!r}: {e}") from None
        amp = bool(self.config and self.config.auto_mixed_precision)
        with scope.View(view), dtypes.default_float(self.config.data_type if self.config else dtypes.float32), \
                mixed_precision.policy_scope("mixed_float16") if amp else contextlib.nullcontext():
            _builds.append(_Build(self.job_type))
            layer_base._build_in_store.append(True)
            try:
                inputs = [self._placeholder(name, ph, view) for name, ph in self.params]
                result = self.fn(*inputs)
                build = _builds[-1]
                if build.loss is not None:      # OneFlow applies regularizers in the update; so does the loss here
                    build.loss = regularizers.penalized(build.loss)
            finally:
                _builds.pop()
                layer_base._build_in_store.pop()
        if amp and build.loss is not None:
            build.loss = losses.in_loss_dtype(build.loss)
            if not isinstance(build.rule, optimizers.LossScaleOptimizer):
                build.rule = optimizers.LossScaleOptimizer(build.rule, name=f"loss_scale_{build.rule.name}")
        outputs, modes, structure = _outputs(self.__name__, result, self.returns, view)
        watched = build.watched
        outputs, modes = outputs + [b for b, _ in watched], modes + [_handler_mode(h, view) for _, h in watched]
        structure = _with_watchers(structure, len(outputs) - len(watched), [h for _, h in watched] +
                                   [_per_example(h, build.loss) for _, h in build.watched_diff])
        if self.job_type == "train" and build.loss is None:
            raise GraphError(f"job function {self.__name__!r} is type='train' but never called "
                             f"flow.optimizer.<Optimizer>(...).minimize(loss)")
        if self._compiled and build.rule is not None:
            _carry_state(self._compiled[1].optimizer, build.rule)
        program = build_program(inputs, outputs, modes, phase="train" if self.job_type == "train" else "predict",
                          loss=build.loss, optimizer=build.rule, name=self.__name__,
                          gradients=[b for b, _ in build.watched_diff])
        ranges = index_ranges(program.nodes, inputs)
        self._compiled = (placement, program, Compiled(program, placement), structure, ranges)
        return self._compiled

    def parallel_plan(self, batch_size=None):
        """What runs where for this job in its view (see ``Model.parallel_plan``); ``batch_size`` defaults to
        the placeholders' own batch dim."""
        compiled = self.build()[2]
        if batch_size is None:
            batch_size = next((ph.shape[0] for _, ph in self.params if ph.shape), None)
        return report.build(compiled, batch_size, read_back=engine.has_engine(compiled.placement.backend))

    def _placeholder(self, name, ph, view):
        if ph.kind == "list" and view != "mirrored":
            raise GraphError(f"job function {self.__name__!r}: argument {name!r} is a tp.ListNumpy.Placeholder, "
                             f"expected in the mirrored view only; the view in force is {view!r} (use "
                             f"tp.Numpy.Placeholder, or function_config().default_logical_view(flow.scope."
                             f"mirrored_view()))")
        return source.placeholder(ph.shape, ph.dtype, name, kind=ph.kind)

    def __call__(self, *args):
        if len(args) != len(self.params):
            names = [n for n, _ in self.params]
            raise InputError(f"job function {self.__name__!r}: expected {len(self.params)} argument(s) {names}, "
                             f"received {len(args)}; call it as {self.__name__}({', '.join(names)})")
        _, program, executable, structure, ranges = self.build()
        feeds = [_check_feed(self.__name__, name, ph, arg, executable.placement.device_num)
                 for (name, ph), arg in zip(self.params, args)]
        for i, node, size, what in ranges:
            check_range(feeds[i], node, size, what, f"job function {self.__name__!r}: placeholder "
                                                    f"{self.params[i][0]!r}")
        result = structure(executable.run(feeds, program.optimizer))
        return _Delivery(self.__name__, result) if self.asynchronous else result


def _carry_state(old, new):
    """A job rebuilt for another view or device count makes its optimizer anew: give it the old one's step and
    slot variables (their values move to the new runtime), so the switch leaves training where it was."""
    if old is not None and type(old) is type(new) and old.all_slot_names == new.all_slot_names:
        new.iterations = old.iterations
        new._slot_variables = old._slot_variables
        if isinstance(new, optimizers.LossScaleOptimizer):      # and its own state (the loss scale)
            new._state = old._state


class _Delivery:
    """What an asynchronous job call returns: call it with a callback to hand the step's result over."""

    def __init__(self, job_name, result):
        self._job_name, self._result, self._delivered = job_name, result, False

    def __call__(self, callback):
        if not callable(callback):
            raise InputError(f"job function {self._job_name!r} (tp.Callback): expected a callable to receive the "
                             f"result, received {callback!r}; call it as {self._job_name}(...)(callback)")
        if self._delivered:
            raise InputError(f"job function {self._job_name!r} (tp.Callback): this call's result was handed to a "
                             f"callback already; call the job again for a new result")
        self._delivered = True
        callback(self._result)


def watch(blob, handler):
    """OneFlow's ``flow.watch``: after each step of the job being built, ``handler`` receives ``blob``'s value
    (a numpy array; a list per device if the handler is annotated ``tp.ListNumpy`` in the mirrored view)."""
    _watched("flow.watch", blob, handler, train_only=False).watched.append((blob, handler))


def watch_diff(blob, handler):
    """OneFlow's ``flow.watch_diff``: after each step of the train job being built, ``handler`` receives the
    gradient of the loss's elements summed (OneFlow 0.x's diff: no 1/batch factor, which OneFlow applies to the
    variables' gradients only) with respect to ``blob``, as one logical numpy array."""
    _watched("flow.watch_diff", blob, handler, train_only=True).watched_diff.append((blob, handler))


def _watched(what, blob, handler, train_only):
    """The build a watch belongs to, once its Blob and handler are checked."""
    if not _builds or (train_only and _builds[-1].job_type != "train"):
        kind = "@flow.global_function(type='train'), where a loss is minimised" if train_only else \
            "@flow.global_function"
        raise GraphError(f"{what}: expected inside a function decorated with {kind}")
    if not isinstance(blob, Blob):
        raise GraphError(f"{what}: expected a Blob to watch, received {type(blob).__name__}")
    if not callable(handler):
        raise GraphError(f"{what}: expected a callable handler for Blob {blob.name!r}, received {handler!r}")
    return _builds[-1]


def _per_example(handler, loss):
    """``handler`` fed the gradient of the loss's element sum, from the step's gradient of its mean (what
    flowlayers trains by): times the loss's element count, OneFlow 0.x's loss instance number."""
    count = int(np.prod(loss.shape)) if loss is not None else 1

    def deliver(value):
        handler(value * np.asarray(count, value.dtype))
    return deliver


def _handler_mode(handler, view):
    try:
        hints = typing.get_type_hints(handler)
    except Exception:           # a handler without resolvable annotations takes the logical value
        hints = {}
    wants_list = any(h is ListNumpy for h in hints.values())
    return "list" if wants_list and view == "mirrored" else "numpy"


def _with_watchers(structure, n_results, handlers):
    """``structure`` over the job's own outputs; the watched values after them go to their handlers."""
    if not handlers:
        return structure

    def deliver(values):
        result = structure(values[:n_results])
        for handler, value in zip(handlers, values[n_results:]):
            handler(value)
        return result
    return deliver


def _has_string_annotations(fn):
    return any(isinstance(p.annotation, str) for p in inspect.signature(fn).parameters.values())


def _outputs(job_name, result, returns, view):
    """Flatten a job's return value into (blobs, modes, function rebuilding the annotated structure)."""
    if result is None:
        return [], [], lambda values: None
    if isinstance(result, Blob):
        mode = _mode(job_name, returns, view)
        per_sample = returns is ListListNumpy
        return [result], [mode], lambda values: _per_sample(values[0]) if per_sample else values[0]
    if isinstance(result, (tuple, list)) and all(isinstance(r, Blob) for r in result):
        args = typing.get_args(returns) if typing.get_origin(returns) in (tuple, typing.Tuple) else ()
        kinds = [args[i] if i < len(args) else returns for i in range(len(result))]
        modes = [_mode(job_name, k, view) for k in kinds]
        return list(result), modes, lambda values: tuple(_per_sample(v) if k is ListListNumpy else v
                                                         for v, k in zip(values, kinds))
    raise GraphError(f"job function {job_name!r}: expected to return a Blob, a tuple of Blobs or None, received "
                     f"{type(result).__name__}")


def _per_sample(per_device):
    """tp.ListListNumpy: per device, its rows as a list of arrays (one per sample)."""
    return [list(part) for part in per_device]


def _mode(job_name, annotation, view):
    if annotation is ListNumpy or annotation is ListListNumpy:
        if view != "mirrored":
            name = "ListNumpy" if annotation is ListNumpy else "ListListNumpy"
            raise GraphError(f"job function {job_name!r}: return annotation tp.{name} expected in the mirrored "
                             f"view, the view in force is {view!r}; use tp.Numpy")
        return "list"
    return "numpy"    # tp.Numpy, no annotation, or a Tuple member without one


def _check_feed(job, name, ph, value, n_devices):
    if ph.kind == "list":
        if not isinstance(value, (list, tuple)):
            raise InputError(f"job function {job!r}: argument {name!r} (tp.ListNumpy.Placeholder) expected a list "
                             f"of {n_devices} arrays, one per device, received a bare {type(value).__name__}; split "
                             f"the batch, e.g. np.split(batch, {n_devices})")
        if len(value) != n_devices:
            raise InputError(f"job function {job!r}: argument {name!r} expected a list of {n_devices} arrays, one "
                             f"per device (flow.config.gpu_device_num), received a list of {len(value)}; pass one "
                             f"array per device")
        return [_check_array(job, f"{name}[{i}]", ph, v) for i, v in enumerate(value)]
    return _check_array(job, name, ph, value)


def _check_array(job, name, ph, value):
    if not isinstance(value, np.ndarray):
        raise InputError(f"job function {job!r}: placeholder {name!r} expected a numpy array of shape "
                         f"{describe_shape(ph.shape)}, received {type(value).__name__}; convert it with np.asarray")
    if value.ndim != len(ph.shape):
        raise InputError(f"job function {job!r}: placeholder {name!r} expected rank {len(ph.shape)}, shape "
                         f"{describe_shape(ph.shape)}, received rank {value.ndim}, shape {describe_shape(value.shape)}"
                         f"; reshape the array to the placeholder's shape")
    if any(d is not None and d != v for d, v in zip(ph.shape, value.shape)):
        raise InputError(f"job function {job!r}: placeholder {name!r} expected shape {describe_shape(ph.shape)}, "
                         f"received {describe_shape(value.shape)}; feed arrays of exactly that shape (a placeholder "
                         f"fixes the batch size: drop or pad a short last batch)")
    if value.dtype != ph.dtype.numpy:
        raise DTypeError(f"job function {job!r}: placeholder {name!r} expected dtype {ph.dtype.name}, received "
                         f"{value.dtype} (convert with .astype(np.{ph.dtype.name}))")
    return value


def registered():
    return list(_registered)


def forget_jobs():
    """Forget every job function defined so far (``flow.clear_session``)."""
    _registered.clear()
