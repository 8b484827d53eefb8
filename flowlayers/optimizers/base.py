"""Optimizer base: learning rate (number, schedule or callable), step counter, slot variables, and what Keras 3
does to every gradient before the rule: clipping (``clipnorm``, ``global_clipnorm`` or ``clipvalue``) and
decoupled weight decay (``weight_decay``, minus ``exclude_from_weight_decay``)."""
import re

from ..errors import ConfigError
from ..framework import step_trace
from ..framework.variable import Variable
from ..initializers import Constant, Zeros
from . import schedules


class Optimizer:
    #: slot names, each a variable shaped like the one it serves (initialised to zeros, or to the value named here)
    slot_names = ()
    slot_initial_values = {}

    def __init__(self, learning_rate=0.001, weight_decay=None, clipnorm=None, clipvalue=None, global_clipnorm=None,
                 gradient_accumulation_steps=None, name=None, **kwargs):
        if not callable(learning_rate) and not isinstance(learning_rate, (int, float)):
            raise ConfigError(f"{type(self).__name__}: learning_rate expected a number, a schedule or a callable "
                              f"step -> rate, received {learning_rate!r}")
        if weight_decay is not None and (isinstance(weight_decay, bool) or not isinstance(weight_decay, (int, float))
                                         or weight_decay < 0):
            raise ConfigError(f"{type(self).__name__}: weight_decay expected None or a number >= 0, received "
                              f"{weight_decay!r}; pass a non-negative number, or None for no decay")
        if kwargs:
            raise ConfigError(f"{type(self).__name__}: unexpected keyword argument(s) {sorted(kwargs)}; check the "
                              f"spelling against Keras' {type(self).__name__} arguments")
        for what, value in (("clipnorm", clipnorm), ("clipvalue", clipvalue), ("global_clipnorm", global_clipnorm)):
            if value is not None and (isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0):
                raise ConfigError(f"{type(self).__name__}: {what} expected None or a number >= 0, received {value!r}; "
                                  f"pass a bound, or None for no clipping")
        if sum(v is not None for v in (clipnorm, clipvalue, global_clipnorm)) > 1:
            raise ConfigError(f"{type(self).__name__}: expected only one of clipnorm, clipvalue and global_clipnorm, "
                              f"received clipnorm={clipnorm}, clipvalue={clipvalue}, global_clipnorm={global_clipnorm}; keep one")
        if gradient_accumulation_steps is not None and (clipnorm or global_clipnorm):
            raise ConfigError(f"{type(self).__name__}: clipping by norm (clipnorm, global_clipnorm) together with "
                              f"gradient_accumulation_steps is not supported yet (the norm would be of the "
                              f"accumulated mean); expected one of them, or clipvalue")
        if gradient_accumulation_steps is not None and (isinstance(gradient_accumulation_steps, bool) or not isinstance(
                gradient_accumulation_steps, int) or gradient_accumulation_steps < 2):
            raise ConfigError(f"{type(self).__name__}: gradient_accumulation_steps expected None or an int >= 2, "
                              f"received {gradient_accumulation_steps!r}")
        self.learning_rate = learning_rate
        self.weight_decay = weight_decay
        self.clipnorm, self.clipvalue, self.global_clipnorm = clipnorm, clipvalue, global_clipnorm
        self._excluded_paths, self._excluded_names = set(), None     # exclude_from_weight_decay
        self.gradient_accumulation_steps = gradient_accumulation_steps
        self.name = name or type(self).__name__.lower()
        self.iterations = 0   # steps applied so far; the step counter saved in checkpoints
        self._slot_variables = {}   # variable path -> its slots, in slot_names order

    def apply(self, grads, trainable_variables=None):
        """Keras 3's ``apply``, in a custom ``train_step``: train ``trainable_variables`` (default: the variables
        the gradients are of) with ``grads`` from ``flow.GradientTape().gradient``.  Recorded while the step is
        traced; each apply is a stage of the compiled step, run in order."""
        grads = list(grads)
        if trainable_variables is None:
            trainable_variables = [getattr(g, "source", None) for g in grads]
        variables = list(trainable_variables)
        if len(variables) != len(grads):
            raise ConfigError(f"{type(self).__name__}.apply: expected one gradient per variable, received "
                              f"{len(grads)} gradients for {len(variables)} variables")
        step_trace.require(f"{type(self).__name__}.apply").apply(self, list(zip(grads, variables)),
                                                                  f"{type(self).__name__}.apply")

    def apply_gradients(self, grads_and_vars):
        """Keras 3's ``apply_gradients(zip(grads, variables))``: ``apply`` with the pairs."""
        pairs = list(grads_and_vars)
        self.apply([g for g, _ in pairs], [v for _, v in pairs])

    def slots(self, var):
        """The slot variables serving ``var`` (zeros at first), made once and kept with the optimizer."""
        if var.path not in self._slot_variables:
            self._slot_variables[var.path] = [slot_variable(self, var, s) for s in self.all_slot_names]
        return self._slot_variables[var.path]

    @property
    def all_slot_names(self):
        """The rule's slots, then the gradient accumulator when ``gradient_accumulation_steps`` is set."""
        return tuple(self.slot_names) + (("gradient_accumulator",) if self.gradient_accumulation_steps else ())

    def is_update_step(self, step):
        """Whether step ``step`` (from 1) updates the variables: every step, or every
        ``gradient_accumulation_steps``-th (Keras 3's rule)."""
        return not self.gradient_accumulation_steps or step % self.gradient_accumulation_steps == 0

    def apply_gradient(self, xp, var, grad, slots, lr, step, update=True, decays=True, norm=None):
        """One step's gradient for ``var``: clipped, ``var`` decayed (``decays``: unless excluded), then the rule;
        with ``gradient_accumulation_steps`` K, added to the accumulator, and on every K-th step (``update``) all
        that done with the mean of the last K gradients and the accumulator cleared, as Keras 3 does: the rule
        sees the count of updates (``step / K``, exact: ``step`` is a multiple of K there) as its step, as Keras'
        ``iterations`` counts them.  ``norm``: the L2 norm the clipping uses (``clip``)."""
        if self.gradient_accumulation_steps:
            *slots, accumulated = slots
            if not update:
                xp.assign(accumulated, accumulated + grad)
                return
            k = self.gradient_accumulation_steps
            grad, step = (grad + accumulated) * (1.0 / k), step / k
            xp.assign(accumulated, accumulated * 0.0)
        grad = self.clip(xp, grad, norm)
        if decays:
            self.decay(xp, var, lr)
        self.update(xp, var, grad, slots, lr, step)

    def apply_all(self, xp, variables, refs, grads, slots, lr, step, update=True, norms=None, state=(),
                  finite=None):
        """One step's rule on every trained variable one device holds: ``refs`` its handles (or ``Ref``s; None
        where it holds no block of that variable), ``grads`` and ``slots`` theirs, ``norms`` per variable the norm
        its clipping uses (or None), ``state`` the optimizer's own state (``state_variables``, in order), ``finite``
        whether every gradient of the step is finite, whole (None: found from ``grads``, when they are whole)."""
        norms = norms or [None] * len(refs)
        for var, ref, grad, per_var, norm in zip(variables, refs, grads, slots, norms):
            if ref is not None:
                self.apply_gradient(xp, ref, grad, per_var, lr, step, update, self.decays(var), norm)

    def state_variables(self):
        """``{name: Variable}``: the optimizer's own state beyond the slots (scalars, whole on every device),
        updated by ``apply_all`` once per step and checkpointed with the slots; none for a plain rule."""
        return {}

    def loss_scale(self, state):
        """The factor the step multiplies the loss by before taking gradients, from its own ``state`` values
        (``LossScaleOptimizer``); None: the loss as it is."""
        return None

    @property
    def checks_finite(self):
        """Whether the rule needs ``finite`` (whether every gradient of the step is finite)."""
        return False

    # Clipping and weight decay, before the rule ------------------------------
    @property
    def clips_by_norm(self):
        """Whether clipping needs gradient norms: each variable's (``clipnorm``) or all together's."""
        return bool(self.clipnorm or self.global_clipnorm)

    def clipping_norms(self, xp, squared):
        """Per variable, the norm ``clip`` uses, from each gradient's sum of squares (over the whole gradient,
        however it is split): its own (``clipnorm``), or the global norm (``global_clipnorm``)."""
        if self.clipnorm:
            return [xp.sqrt(s) for s in squared]
        if self.global_clipnorm:
            total = squared[0]
            for s in squared[1:]:
                total = total + s
            return [xp.sqrt(total)] * len(squared)
        return [None] * len(squared)

    def clip(self, xp, grad, norm):
        """Keras 3's clipping of one gradient: ``g * c / max(|g|, c)`` (``clipnorm``), ``g * c * min(1/n, 1/c)``
        with ``n`` the global norm (``global_clipnorm``; NaN if it is not finite), or into ``[-c, c]``."""
        if self.clipnorm:
            return grad * self.clipnorm / xp.maximum(norm, self.clipnorm)
        if self.global_clipnorm:
            c = self.global_clipnorm
            return grad * (c * xp.minimum(1.0 / norm, 1.0 / c) + (norm - norm))
        if self.clipvalue:
            return xp.clip(grad, -self.clipvalue, self.clipvalue)
        return grad

    def exclude_from_weight_decay(self, var_list=None, var_names=None):
        """Keras': no weight decay for the variables in ``var_list``, nor for those whose name (the last part of
        the path: ``"bias"``) any of ``var_names`` finds (``re.search``).  Before the optimizer's first step."""
        if self.iterations or self._slot_variables:
            raise ConfigError(f"{type(self).__name__}.exclude_from_weight_decay: expected before the optimizer's "
                              f"first step (Keras: before it is built), received it after; call it right after "
                              f"making the optimizer")
        paths = []
        for v in var_list or ():
            if not hasattr(v, "path"):
                raise ConfigError(f"{type(self).__name__}.exclude_from_weight_decay: var_list expected variables "
                                  f"(model.weights), received {v!r}")
            paths.append(v.path)
        names = list(var_names or ())
        for name in names:
            if not isinstance(name, str):
                raise ConfigError(f"{type(self).__name__}.exclude_from_weight_decay: var_names expected strings, "
                                  f"received {name!r}")
        self._excluded_paths = set(paths)
        self._excluded_names = re.compile("|".join(names)) if names else None

    def decays(self, var):
        """Whether ``var`` (a Variable) takes weight decay."""
        if not self.weight_decay or var.path in self._excluded_paths:
            return False
        return self._excluded_names is None or self._excluded_names.search(var.path.split("/")[-1]) is None

    def current_learning_rate(self):
        """The rate for the next step, from a float or a schedule called with the step."""
        return self.learning_rate_at(self.iterations)

    def learning_rate_at(self, iterations):
        """The rate of the step taken after ``iterations`` steps."""
        lr = self.learning_rate
        return float(lr(iterations)) if callable(lr) else float(lr)

    def update(self, xp, var, grad, slots, lr, step):
        """Write the new value of ``var`` (and its ``slots``) with ``xp.assign``; ``step`` counts from 1.

        ``xp`` may offer an engine kernel for a whole rule, named ``apply_<rule>`` and listed in ``xp.whole_rules``,
        that computes exactly the rule's arithmetic in one op per variable (an update written out is five to
        fifteen ops per variable, and on DTensor each costs tracing and SPMD expansion).  Rules use it when ``xp``
        lists it:

        - ``xp.apply_sgd(var, grad, m, lr, momentum, nesterov)``, ``m`` None without momentum;
        - ``xp.apply_adam(var, m, v, grad, lr, step, beta_1, beta_2, epsilon)``.

        Kernels may round differently from the written-out arithmetic (Adam: ~1e-7 after a few steps); every
        view of one backend uses the same ones, so the view-switch promise is untouched."""
        raise NotImplementedError

    def decay(self, xp, var, lr):
        """Keras 3's decoupled weight decay, before the rule: ``var -= var * weight_decay * lr``."""
        if self.weight_decay:
            xp.assign(var, var - var * (self.weight_decay * lr))

    def get_config(self):
        """Keras' config: a schedule as learning rate written as ``schedules.serialize`` writes it."""
        lr = self.learning_rate
        lr = schedules.serialize(lr) if isinstance(lr, schedules.LearningRateSchedule) else lr
        return {"name": self.name, "learning_rate": lr, "weight_decay": self.weight_decay,
                "clipnorm": self.clipnorm, "clipvalue": self.clipvalue, "global_clipnorm": self.global_clipnorm,
                "gradient_accumulation_steps": self.gradient_accumulation_steps}

    @classmethod
    def from_config(cls, config, custom_objects=None):
        """The optimizer of ``get_config``'s dict; a written schedule made again (Keras' classes, or from
        ``custom_objects``)."""
        config = dict(config)
        if isinstance(config.get("learning_rate"), dict):
            config["learning_rate"] = schedules.deserialize(config["learning_rate"], custom_objects)
        return cls(**config)

    def __repr__(self):
        return f"{type(self).__name__}({', '.join(f'{k}={v!r}' for k, v in self.get_config().items())})"


def slot_variable(optimizer, var, slot):
    value = optimizer.slot_initial_values.get(slot, 0.0)
    initial = Constant(value) if value else Zeros()
    slot_var = Variable(f"{optimizer.name}/{var.path}/{slot}", var.shape, var.dtype, initial, trainable=False)
    slot_var.layout_of = var          # a slot is laid out like the variable it serves
    return slot_var
