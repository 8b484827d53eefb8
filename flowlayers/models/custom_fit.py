"""``fit``, ``evaluate``, ``predict`` and ``*_on_batch`` of a model with its own ``train_step`` / ``test_step`` /
``predict_step``: batches of the data's elements through the traced step's stages (``custom_steps.Stages``), the
logs its step returns handed to the callbacks, Keras' way (``model.metrics`` reset at each epoch)."""
import functools

import numpy as np

from .. import callbacks as callbacks_mod, engine
from ..errors import InputError
from . import custom_steps, data_adapter as da, training
from .epoch_iterator import EpochIterator, split_validation
from .running import alone


def _refuse(model, what, **given):
    """Arguments of fit that a custom step does not take yet: refused by name, never ignored."""
    for name, value in given.items():
        if value:
            raise InputError(f"{what}: {name}={value!r} is not supported with a custom {_step(what)}; expected "
                             f"{name} left out")
    for name, value in (("steps_per_execution", model.steps_per_execution),
                        ("micro_batches", model.trainer.micro_batches)):
        if value != 1:
            raise InputError(f"{what}: compile({name}={value}) is not supported with a custom {_step(what)}; "
                             f"expected {name}=1")


def _step(what):
    return "predict_step" if what.endswith("predict") else "test_step" if "evaluate" in what or "test" in what \
        else "train_step"


def _epochs(x, y, sample_weight, batch_size, shuffle, seed, steps, what):
    """The EpochIterator of what ``fit``/``evaluate``/``predict`` received: per batch the element's structure and
    its flat arrays, at most ``steps`` batches an epoch."""
    if da.is_stream(x):
        if y is not None or sample_weight is not None:
            raise InputError(f"{what}: y and sample_weight expected None with x a {type(x).__name__} (its "
                             f"elements carry them)")
        return EpochIterator(da.adapter(x, what, shuffle=shuffle, seed=seed, steps_per_epoch=steps), _flat, steps)
    element = custom_steps.pack(x, y, sample_weight)
    arrays = [np.asarray(a) for a in custom_steps.leaves(element)]
    if not arrays or any(len(a) != len(arrays[0]) for a in arrays) or any(a.ndim == 0 for a in arrays):
        raise InputError(f"{what}: expected arrays of one length (one row per sample), received shapes "
                         f"{[a.shape for a in arrays]}")
    if not len(arrays[0]):
        raise InputError(f"{what}: expected at least one sample, received arrays of 0 samples")
    adapter = da.adapter(x, what, training._batch_size(batch_size, what), shuffle, seed, arrays=arrays)
    return EpochIterator(adapter, functools.partial(_structured, element), steps)


def _structured(element, batch):
    """A batch of the arrays of ``element``: ``(element, its arrays)``."""
    return element, list(batch)


def _flat(item):
    """A stream's element: ``(element as numpy arrays, its flat arrays)``."""
    item = _numpy(item)
    return item, [np.asarray(a) for a in custom_steps.leaves(item)]


def _numpy(item):
    """A stream's element as numpy arrays (tensors converted), its structure kept."""
    if isinstance(item, dict):
        return {k: _numpy(v) for k, v in item.items()}
    if isinstance(item, (list, tuple)):
        return type(item)(_numpy(v) for v in item)
    return None if item is None else np.asarray(item)


class _Stepper:
    """The traced step of ``phase``, traced again where the element's shapes or dtypes change."""

    def __init__(self, model, phase, placement):
        self.model, self.phase, self.placement = model, phase, placement
        self.stages = model.trainer.custom_stages

    def traced(self, element, arrays):
        """The Stages for batches like this one, traced once."""
        key = (self.phase, self.placement, custom_steps.signature(arrays), _shape_of(element))
        if key not in self.stages:
            self.stages[key] = custom_steps.Stages(self.model, self.phase, element, self.placement)
        return self.stages[key]

    def __call__(self, element, arrays):
        return self.traced(element, arrays).run(arrays)


def _shape_of(element):
    """The structure of an element (kinds and keys), its arrays left out."""
    if isinstance(element, dict):
        return ("dict",) + tuple((k, _shape_of(v)) for k, v in element.items())
    if isinstance(element, (list, tuple)):
        return (type(element).__name__,) + tuple(_shape_of(v) for v in element)
    return None if element is None else "array"


def _reset(model):
    for m in model.metrics:
        m.reset_state()


def fit(model, x, y, batch_size, epochs, verbose, callbacks, validation_split, validation_data, shuffle,
        initial_epoch, steps_per_epoch, sample_weight, class_weight):
    with alone(model, "fit"):
        what = f"Model {model.name!r}.fit"
        _refuse(model, what, validation_split=validation_split, class_weight=class_weight)
        if not isinstance(epochs, int) or epochs < 0:
            raise InputError(f"{what}: epochs expected a non-negative int, received {epochs!r}")
        training.checked_steps(steps_per_epoch, what, "steps_per_epoch")
        placement = engine.placement()
        data = _epochs(x, y, sample_weight, batch_size, shuffle, placement.seed, steps_per_epoch, what)
        history = callbacks_mod.History()
        cbs = training._callback_list(model, callbacks, verbose, {"epochs": epochs, "steps": data.steps,
                                                                  "verbose": verbose}, history)
        model.history, model.stop_training = history, False
        step = _Stepper(model, "train", placement)
        cbs.on_train_begin({})
        for epoch in range(initial_epoch, epochs):
            _reset(model)
            cbs.on_epoch_begin(epoch, {})
            logs = {}
            for k, (element, arrays) in enumerate(data.batches(epoch)):
                cbs.on_train_batch_begin(k, logs)
                logs = step(element, arrays)
                cbs.on_train_batch_end(k, logs)
                if model.stop_training:
                    break
            if not logs:
                raise InputError(f"{what}: x expected at least one batch in epoch {epoch + 1}, received none")
            if validation_data is not None:
                val_x, val_y, *val_w = split_validation(validation_data, what)
                val = model.evaluate(val_x, val_y, sample_weight=(val_w or [None])[0], batch_size=batch_size,
                                     verbose=0, return_dict=True)
                logs = {**logs, **{f"val_{k}": v for k, v in val.items()}}
            cbs.on_epoch_end(epoch, logs)
            if model.stop_training:
                break
        cbs.on_train_end({})
        return history


def evaluate(model, x, y, sample_weight, batch_size, verbose, callbacks, return_dict, steps):
    with alone(model, "evaluate"):
        what = f"Model {model.name!r}.evaluate"
        _refuse(model, what)
        placement = engine.placement()
        data = _epochs(x, y, sample_weight, batch_size, False, placement.seed, steps, what)
        cbs = training._callback_list(model, callbacks, verbose, {"verbose": verbose, "epochs": 1,
                                                                  "steps": data.batches_per_pass})
        step, logs = _Stepper(model, "eval", placement), {}
        _reset(model)
        cbs.on_test_begin({})
        for k, (element, arrays) in enumerate(data.batches(0)):
            cbs.on_test_batch_begin(k, logs)
            logs = step(element, arrays)
            cbs.on_test_batch_end(k, logs)
        if not logs:
            raise InputError(f"{what}: x expected at least one batch, received none")
        cbs.on_test_end(logs)
        return logs if return_dict else _values(logs)


def predict(model, x, batch_size, verbose, callbacks, steps):
    with alone(model, "predict"):
        what = f"Model {model.name!r}.predict"
        _refuse(model, what)
        placement = engine.placement()
        data = _epochs(x, None, None, batch_size, False, placement.seed, steps, what)
        step, outputs, structure = _Stepper(model, "predict", placement), [], None
        cbs = training._callback_list(model, callbacks, verbose, {"verbose": verbose, "epochs": 1,
                                                                  "steps": data.batches_per_pass})
        cbs.on_predict_begin({})
        for k, (element, arrays) in enumerate(data.batches(0)):
            cbs.on_predict_batch_begin(k, {})
            stages = step.traced(element, arrays)
            outputs.append(stages.run(arrays))
            structure = stages.result
            cbs.on_predict_batch_end(k, {"outputs": outputs[-1]})
        if not outputs:
            raise InputError(f"{what}: x expected at least one batch, received none")
        cbs.on_predict_end({})
        merged = [np.concatenate([o[i] for o in outputs]) for i in range(len(outputs[0]))]
        return custom_steps.rebuilt(structure, iter(merged))


def on_batch(model, x, y, sample_weight, train, return_dict):
    """``train_on_batch`` / ``test_on_batch``: the step on all of ``x`` as one batch; its logs (metrics reset)."""
    method = "train_on_batch" if train else "test_on_batch"
    with alone(model, method):
        what = f"Model {model.name!r}.{method}"
        _refuse(model, what)
        placement = engine.placement()
        data = _epochs(x, y, sample_weight, len(training.first_array(x)) or 1, False, placement.seed, None, what)
        _reset(model)
        logs = {}
        for element, arrays in data.batches(0):
            logs = _Stepper(model, "train" if train else "eval", placement)(element, arrays)
        return logs if return_dict else _values(logs)


def _values(logs):
    values = list(logs.values())
    return values[0] if len(values) == 1 else values
