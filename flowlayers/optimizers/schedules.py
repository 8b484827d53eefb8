"""Keras 3's learning rate schedules (``keras.optimizers.schedules``): a schedule is called on the host with the
number of steps taken and gives the rate of the next step.  Each computes in float32, in Keras' order of
operations, so its rates are Keras' (an optimizer sends the rate to the device as float32 anyway).

    flow.optimizers.Adam(flow.optimizers.schedules.ExponentialDecay(0.1, decay_steps=100, decay_rate=0.9))
"""
import math

import numpy as np

from ..errors import ConfigError

F32 = np.float32


class LearningRateSchedule:
    """The base: ``__call__(step)`` gives the rate after ``step`` steps; ``get_config`` the arguments that make it
    again (``from_config``)."""

    def __call__(self, step):
        raise NotImplementedError(f"learning rate schedule {type(self).__name__!r}: expected __call__(self, step) "
                                  f"to be overridden")

    def get_config(self):
        raise NotImplementedError(f"learning rate schedule {type(self).__name__!r}: expected get_config() to be "
                                  f"overridden, to be saved")

    @classmethod
    def from_config(cls, config):
        return cls(**config)

    def __repr__(self):
        return f"{type(self).__name__}({', '.join(f'{k}={v!r}' for k, v in self.get_config().items())})"


def _positive_steps(owner, what, value):
    if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)) or value <= 0:
        raise ConfigError(f"{owner}: {what} expected a number > 0, received {value!r}")


def _number(owner, what, value):
    if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)):
        raise ConfigError(f"{owner}: {what} expected a number, received {value!r}")


def _step(step):
    return F32(step)


def _power(base, exponent):
    """float32 ``base ** exponent``, correctly rounded (from float64), as an engine's float32 ``pow`` rounds."""
    return F32(np.power(np.float64(base), np.float64(exponent)))


def _cos(x):
    return F32(np.cos(np.float64(x)))


def _log(x):
    return F32(np.log(np.float64(x)))


class _RateDecay(LearningRateSchedule):
    """What ExponentialDecay and InverseTimeDecay share: their arguments and ``step / decay_steps`` (floored with
    ``staircase``)."""

    def __init__(self, initial_learning_rate, decay_steps, decay_rate, staircase, name):
        what = type(self).__name__
        for argument, value in (("initial_learning_rate", initial_learning_rate), ("decay_rate", decay_rate)):
            _number(what, argument, value)
        _positive_steps(what, "decay_steps", decay_steps)
        self.initial_learning_rate, self.decay_steps, self.decay_rate = initial_learning_rate, decay_steps, decay_rate
        self.staircase, self.name = staircase, name

    def _ratio(self, step):
        p = _step(step) / F32(self.decay_steps)
        return np.floor(p) if self.staircase else p

    def get_config(self):
        return {"initial_learning_rate": self.initial_learning_rate, "decay_steps": self.decay_steps,
                "decay_rate": self.decay_rate, "staircase": self.staircase, "name": self.name}


class ExponentialDecay(_RateDecay):
    """``initial_learning_rate * decay_rate ** (step / decay_steps)`` (``staircase``: the exponent floored)."""

    def __init__(self, initial_learning_rate, decay_steps, decay_rate, staircase=False, name="ExponentialDecay"):
        super().__init__(initial_learning_rate, decay_steps, decay_rate, staircase, name)

    def __call__(self, step):
        return F32(self.initial_learning_rate) * _power(F32(self.decay_rate), self._ratio(step))


class PiecewiseConstantDecay(LearningRateSchedule):
    """``values[0]`` up to and including step ``boundaries[0]``, ``values[i]`` after ``boundaries[i - 1]`` up to
    ``boundaries[i]``, ``values[-1]`` after the last boundary."""

    def __init__(self, boundaries, values, name="PiecewiseConstant"):
        boundaries, values = list(boundaries), list(values)
        if len(boundaries) != len(values) - 1:
            raise ConfigError(f"PiecewiseConstantDecay: expected one boundary fewer than values, received "
                              f"boundaries={boundaries} ({len(boundaries)}) and values={values} ({len(values)})")
        for what, seq in (("boundaries", boundaries), ("values", values)):
            for v in seq:
                _number("PiecewiseConstantDecay", what, v)
        self.boundaries, self.values, self.name = boundaries, values, name

    def __call__(self, step):
        for boundary, value in zip(self.boundaries, self.values):
            if step <= boundary:
                return F32(value)
        return F32(self.values[-1])

    def get_config(self):
        return {"boundaries": self.boundaries, "values": self.values, "name": self.name}


class PolynomialDecay(LearningRateSchedule):
    """``(initial - end) * (1 - step / decay_steps) ** power + end``, the step held at ``decay_steps`` (``cycle``:
    ``decay_steps`` stretched to the first multiple at or above the step instead)."""

    def __init__(self, initial_learning_rate, decay_steps, end_learning_rate=0.0001, power=1.0, cycle=False,
                 name="PolynomialDecay"):
        for what, value in (("initial_learning_rate", initial_learning_rate), ("end_learning_rate", end_learning_rate),
                            ("power", power)):
            _number("PolynomialDecay", what, value)
        _positive_steps("PolynomialDecay", "decay_steps", decay_steps)
        self.initial_learning_rate, self.decay_steps, self.end_learning_rate = (initial_learning_rate, decay_steps,
                                                                                end_learning_rate)
        self.power, self.cycle, self.name = power, cycle, name

    def __call__(self, step):
        step, decay_steps = _step(step), F32(self.decay_steps)
        if self.cycle:
            decay_steps = decay_steps * (F32(1.0) if step == 0 else np.ceil(step / decay_steps))
        else:
            step = min(step, decay_steps)
        p = step / decay_steps
        initial, end = F32(self.initial_learning_rate), F32(self.end_learning_rate)
        return (initial - end) * _power(F32(1.0) - p, F32(self.power)) + end

    def get_config(self):
        return {"initial_learning_rate": self.initial_learning_rate, "decay_steps": self.decay_steps,
                "end_learning_rate": self.end_learning_rate, "power": self.power, "cycle": self.cycle,
                "name": self.name}


class InverseTimeDecay(_RateDecay):
    """``initial_learning_rate / (1 + decay_rate * step / decay_steps)`` (``staircase``: the ratio floored)."""

    def __init__(self, initial_learning_rate, decay_steps, decay_rate, staircase=False, name="InverseTimeDecay"):
        super().__init__(initial_learning_rate, decay_steps, decay_rate, staircase, name)

    def __call__(self, step):
        return F32(self.initial_learning_rate) / (F32(1.0) + F32(self.decay_rate) * self._ratio(step))


def _cosine(fraction, alpha):
    """``(1 - alpha) * (1 + cos(pi * fraction)) / 2 + alpha``, in float32 (``1 - alpha`` rounded once, as Keras)."""
    decayed = F32(0.5) * (F32(1.0) + _cos(F32(math.pi) * fraction))
    return F32(1.0 - alpha) * decayed + F32(alpha)


class CosineDecay(LearningRateSchedule):
    """``warmup_steps`` of linear warm-up from ``initial_learning_rate`` to ``warmup_target`` (when it is set),
    then ``decay_steps`` of cosine decay from there (or from ``initial_learning_rate``) to ``alpha`` times it."""

    def __init__(self, initial_learning_rate, decay_steps, alpha=0.0, name="CosineDecay", warmup_target=None,
                 warmup_steps=0):
        for what, value in (("initial_learning_rate", initial_learning_rate), ("alpha", alpha),
                            ("warmup_steps", warmup_steps)):
            _number("CosineDecay", what, value)
        if warmup_target is not None:
            _number("CosineDecay", "warmup_target", warmup_target)
        _positive_steps("CosineDecay", "decay_steps", decay_steps)
        self.initial_learning_rate, self.decay_steps, self.alpha, self.name = (initial_learning_rate, decay_steps,
                                                                               alpha, name)
        self.warmup_target, self.warmup_steps = warmup_target, warmup_steps

    def __call__(self, step):
        step, decay_steps, initial = _step(step), F32(self.decay_steps), F32(self.initial_learning_rate)
        if self.warmup_target is None:
            return initial * _cosine(min(step, decay_steps) / decay_steps, self.alpha)
        target, warmup = F32(self.warmup_target), F32(self.warmup_steps)
        step = min(step, decay_steps + warmup)
        if step < warmup:
            return (target - initial) * (step / warmup) + initial
        return target * _cosine((step - warmup) / decay_steps, self.alpha)

    def get_config(self):
        return {"initial_learning_rate": self.initial_learning_rate, "decay_steps": self.decay_steps,
                "alpha": self.alpha, "name": self.name, "warmup_target": self.warmup_target,
                "warmup_steps": self.warmup_steps}


class CosineDecayRestarts(LearningRateSchedule):
    """Cosine decay over ``first_decay_steps``, then restarts: each period ``t_mul`` times longer than the one
    before and starting ``m_mul`` times lower; ``alpha`` the floor, as a fraction of the start."""

    def __init__(self, initial_learning_rate, first_decay_steps, t_mul=2.0, m_mul=1.0, alpha=0.0, name="SGDRDecay"):
        for what, value in (("initial_learning_rate", initial_learning_rate), ("t_mul", t_mul), ("m_mul", m_mul),
                            ("alpha", alpha)):
            _number("CosineDecayRestarts", what, value)
        _positive_steps("CosineDecayRestarts", "first_decay_steps", first_decay_steps)
        self.initial_learning_rate, self.first_decay_steps = initial_learning_rate, first_decay_steps
        self._t_mul, self._m_mul, self.alpha, self.name = t_mul, m_mul, alpha, name

    def __call__(self, step):
        t_mul, m_mul = F32(self._t_mul), F32(self._m_mul)
        fraction = _step(step) / F32(self.first_decay_steps)
        if t_mul == 1.0:
            restart = np.floor(fraction)
            fraction = fraction - restart
        else:
            restart = np.floor(_log(F32(1.0) - fraction * (F32(1.0) - t_mul)) / _log(t_mul))
            done = (F32(1.0) - _power(t_mul, restart)) / (F32(1.0) - t_mul)
            fraction = (fraction - done) / _power(t_mul, restart)
        cosine = F32(0.5) * _power(m_mul, restart) * (F32(1.0) + _cos(F32(math.pi) * fraction))
        alpha = F32(self.alpha)
        return F32(self.initial_learning_rate) * ((F32(1.0) - alpha) * cosine + alpha)

    def get_config(self):
        return {"initial_learning_rate": self.initial_learning_rate, "first_decay_steps": self.first_decay_steps,
                "t_mul": self._t_mul, "m_mul": self._m_mul, "alpha": self.alpha, "name": self.name}


SCHEDULES = {cls.__name__: cls for cls in (ExponentialDecay, PiecewiseConstantDecay, PolynomialDecay,
                                           InverseTimeDecay, CosineDecay, CosineDecayRestarts)}


def serialize(learning_rate_schedule):
    """A schedule as Keras 3 writes it: ``{"module", "class_name", "config", "registered_name"}``."""
    if not isinstance(learning_rate_schedule, LearningRateSchedule):
        raise ConfigError(f"schedules.serialize: expected a flow.optimizers.schedules.LearningRateSchedule, "
                          f"received {learning_rate_schedule!r}")
    cls = type(learning_rate_schedule)
    return {"module": "keras.optimizers.schedules" if cls in SCHEDULES.values() else cls.__module__,
            "class_name": cls.__name__, "config": learning_rate_schedule.get_config(),
            "registered_name": None if cls in SCHEDULES.values() else cls.__name__}


def deserialize(config, custom_objects=None):
    """A schedule from ``serialize``'s dict (or Keras 3's): Keras' classes by name, others from
    ``custom_objects``."""
    custom_objects = custom_objects or {}
    if not isinstance(config, dict) or not isinstance(config.get("class_name"), str):
        raise ConfigError(f"schedules.deserialize: expected a {{'class_name', 'config'}} dict, received {config!r}")
    name = config["class_name"]
    for key in (config.get("registered_name"), name):
        if key in custom_objects:
            return custom_objects[key].from_config(config.get("config") or {})
    if name not in SCHEDULES:
        raise ConfigError(f"schedules.deserialize: expected one of {sorted(SCHEDULES)} or a class in "
                          f"custom_objects, received class_name {name!r}")
    return SCHEDULES[name].from_config(config.get("config") or {})
