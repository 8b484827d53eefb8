"""LossScaleOptimizer: Keras 3's dynamic loss scaling around another optimizer, for float16 training.

    opt = flow.optimizers.LossScaleOptimizer(flow.optimizers.Adam(1e-3))    # compile does it under mixed_float16

The loss is multiplied by the scale before the gradients are taken, so that small float16 gradients do not flush
to zero; the rule divides them by it again.  A step whose gradients are not all finite (checked over every
gradient, whole, in every view) changes no variable and halves the scale; after ``dynamic_growth_steps`` finite
steps in a row the scale doubles.  The scale and both counters are the optimizer's own state: scalar float32
variables on the devices (no step waits for the host), checkpointed beside the slots.

``iterations`` (the inner optimizer's) counts every step run, skipped ones too, and a learning-rate schedule reads
it; the inner rule's own step count (Adam's bias correction) leaves skipped steps out, as Keras' does.
"""
import math

from .. import dtypes
from ..errors import ConfigError
from ..framework.variable import Variable
from ..initializers import Constant, Zeros
from .base import Optimizer
from .rules import SGD, Adam, AdamW, RMSprop

STATE = ("dynamic_scale", "step_counter", "skipped_steps")
#: Keras' LossScaleOptimizer takes none of these itself: they belong to the inner optimizer
INNER_ARGUMENTS = ("learning_rate", "weight_decay", "clipnorm", "clipvalue", "global_clipnorm",
                   "gradient_accumulation_steps", "use_ema", "ema_momentum", "ema_overwrite_frequency",
                   "loss_scale_factor")


class LossScaleOptimizer(Optimizer):
    def __init__(self, inner_optimizer, initial_scale=2.0 ** 15, dynamic_growth_steps=2000, name=None, **kwargs):
        what = "LossScaleOptimizer"
        if not kwargs.pop("dynamic", True):
            raise ConfigError(f"{what}: dynamic=False is not supported (Keras 3 dropped it); expected dynamic loss "
                              f"scaling, or no LossScaleOptimizer")
        if isinstance(inner_optimizer, dict):       # a saved model's spec of the inner optimizer
            inner_optimizer = _remade(inner_optimizer)
        if not isinstance(inner_optimizer, Optimizer) or isinstance(inner_optimizer, LossScaleOptimizer):
            raise ConfigError(f"{what}: inner_optimizer expected a flow.optimizers.* instance other than a "
                              f"LossScaleOptimizer, received {inner_optimizer!r}")
        given = [k for k in kwargs if k in INNER_ARGUMENTS]
        if given:
            raise ConfigError(f"{what}: does not take {given}; expected them set on the inner_optimizer, as Keras "
                              f"has it")
        if kwargs:
            raise ConfigError(f"{what}: unexpected keyword argument(s) {sorted(kwargs)}; expected inner_optimizer, "
                              f"initial_scale, dynamic_growth_steps and name")
        if isinstance(initial_scale, bool) or not isinstance(initial_scale, (int, float)) or not (
                0 < initial_scale < math.inf):
            raise ConfigError(f"{what}: initial_scale expected a positive finite number, received {initial_scale!r}")
        if isinstance(dynamic_growth_steps, bool) or not isinstance(dynamic_growth_steps, int) or \
                dynamic_growth_steps < 1:
            raise ConfigError(f"{what}: dynamic_growth_steps expected a positive int, received "
                              f"{dynamic_growth_steps!r}")
        if inner_optimizer.state_variables():
            raise ConfigError(f"{what}: an inner optimizer with state of its own ({type(inner_optimizer).__name__}: "
                              f"{sorted(inner_optimizer.state_variables())}) is not supported; expected one whose "
                              f"state is its slots (SGD, Adam, AdamW, RMSprop, Adagrad, Adamax, Adadelta, Lion)")
        if inner_optimizer.gradient_accumulation_steps:
            raise ConfigError(f"{what}: an inner optimizer with gradient_accumulation_steps is not supported; "
                              f"expected one that updates every step")
        self.inner_optimizer = inner_optimizer
        self.initial_scale, self.dynamic_growth_steps = float(initial_scale), dynamic_growth_steps
        self.name = name or "loss_scale_optimizer"
        self.gradient_accumulation_steps = None
        self._slot_variables, self._state = {}, None

    # What belongs to the inner optimizer --------------------------------
    @property
    def learning_rate(self):
        return self.inner_optimizer.learning_rate

    @learning_rate.setter
    def learning_rate(self, value):
        self.inner_optimizer.learning_rate = value

    @property
    def iterations(self):
        return self.inner_optimizer.iterations

    @iterations.setter
    def iterations(self, value):
        self.inner_optimizer.iterations = value

    @property
    def slot_names(self):
        return self.inner_optimizer.all_slot_names

    @property
    def all_slot_names(self):
        return self.inner_optimizer.all_slot_names

    @property
    def clips_by_norm(self):
        return self.inner_optimizer.clips_by_norm

    def clipping_norms(self, xp, squared):
        return self.inner_optimizer.clipping_norms(xp, squared)

    def decays(self, var):
        return self.inner_optimizer.decays(var)

    def exclude_from_weight_decay(self, var_list=None, var_names=None):
        self.inner_optimizer.exclude_from_weight_decay(var_list, var_names)

    # Its own state ---------------------------------------------------------
    def state_variables(self):
        """``dynamic_scale`` (from ``initial_scale``), ``step_counter`` (finite steps since the scale last
        changed) and ``skipped_steps``: scalar float32 variables, made once."""
        if self._state is None:
            self._state = {name: _ScalarState(f"{self.name}/{name}", init) for name, init in
                           zip(STATE, (Constant(self.initial_scale), Zeros(), Zeros()))}
        return dict(self._state)

    @property
    def dynamic_scale(self):
        """The scale now (read from the devices)."""
        return float(self.state_variables()["dynamic_scale"].numpy())

    @property
    def step_counter(self):
        return int(self.state_variables()["step_counter"].numpy())

    def scale_loss(self, loss):
        """``loss`` times the scale (Keras': the scale in force, ``initial_scale`` before the first step)."""
        scale = self.dynamic_scale if self._state is not None and self._state["dynamic_scale"].location else \
            self.initial_scale
        return loss * scale

    def loss_scale(self, state):
        return state[0]

    @property
    def checks_finite(self):
        return True

    # The rule --------------------------------------------------------------
    def apply_all(self, xp, variables, refs, grads, slots, lr, step, update=True, norms=None, state=(),
                  finite=None):
        """Keras 3's step: with every gradient finite, the inner rule on the gradients divided by the scale (its
        step count less the skipped steps) and the counter advanced, the scale doubled at ``dynamic_growth_steps``;
        otherwise no variable or slot changes, the scale halves and the counter restarts."""
        scale, counter, skipped = state
        if finite is None:
            finite = xp.all_finite([g for g in grads if g is not None])
        unscaled = [None if g is None else g / scale for g in grads]
        norms = None if norms is None else [None if n is None else n / scale for n in norms]
        written = [r for r in refs if r is not None] + [s for r, per in zip(refs, slots) if r is not None for s in per]
        xp.when(finite, lambda: self.inner_optimizer.apply_all(xp, variables, refs, unscaled, slots, lr,
                                                               step - skipped, update, norms), written)
        grows = xp.greater_equal(counter, float(self.dynamic_growth_steps - 1))
        new_scale = xp.where(finite, xp.where(grows, scale * 2.0, scale * 1.0), scale * 0.5)
        new_counter = xp.where(finite, xp.where(grows, counter * 0.0, counter + 1.0), counter * 0.0)
        new_skipped = xp.where(finite, skipped * 1.0, skipped + 1.0)
        xp.assign(scale, new_scale)
        xp.assign(counter, new_counter)
        xp.assign(skipped, new_skipped)

    def get_config(self):
        inner = self.inner_optimizer
        return {"name": self.name, "inner_optimizer": {"class_name": type(inner).__name__,
                                                       "module": type(inner).__module__, "config": inner.get_config()},
                "initial_scale": self.initial_scale, "dynamic_growth_steps": self.dynamic_growth_steps}


class _ScalarState(Variable):
    """One scalar of an optimizer's own state: whole on every device whatever the layout rules say."""

    def __init__(self, path, initializer):
        super().__init__(path, (), dtypes.float32, initializer, trainable=False)
        self._placement = None

    def mesh_spec(self, mesh, rules):
        return ()


def _remade(spec):
    """The inner optimizer of a saved LossScaleOptimizer, from its class name and config."""
    classes = {c.__name__: c for c in (SGD, Adam, AdamW, RMSprop)}
    if not isinstance(spec, dict) or spec.get("class_name") not in classes:
        raise ConfigError(f"LossScaleOptimizer: inner_optimizer expected an optimizer or the spec of one of "
                          f"{sorted(classes)}, received {spec!r}")
    return classes[spec["class_name"]].from_config(spec["config"])
