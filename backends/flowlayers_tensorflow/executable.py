"""What both views' executables share: a Program bound to a runtime, handed its plan, seed and variable handles,
and the update half of a training step (the optimizer rule on one device's variables, with TF's kernels for
whole rules: ``TFMath``).  The forward half is ``step.py``; the views are ``mirrored.py`` and ``consistent.py``.
"""
import tensorflow as tf

from flowlayers.backend_common import Executable

from . import placements


class TFMath:
    """The array namespace optimizer rules are written against, with TF's kernels for whole rules: one op per
    variable instead of five to fifteen, so a deep model's update step traces and compiles several times faster
    (on DTensor each op costs SPMD expansion).  They compute the rules' arithmetic in the same order."""
    sqrt = staticmethod(tf.sqrt)
    minimum = staticmethod(tf.minimum)
    maximum = staticmethod(tf.maximum)
    clip = staticmethod(tf.clip_by_value)
    abs = staticmethod(tf.abs)
    sign = staticmethod(tf.sign)
    pow = staticmethod(tf.pow)
    where = staticmethod(tf.where)
    greater_equal = staticmethod(tf.greater_equal)
    whole_rules = frozenset({"sgd", "adam"})     # apply_sgd, apply_adam

    def __init__(self):
        self._constants = {}    # one per value and dtype in the traced step, not one per variable

    def constant(self, value, dtype):
        if (value, dtype) not in self._constants:
            self._constants[value, dtype] = tf.constant(value, dtype)
        return self._constants[value, dtype]

    def power(self, base, step, dtype):
        """``base ** step``, once per base in the traced step."""
        if ("pow", base, dtype) not in self._constants:
            self._constants["pow", base, dtype] = tf.cast(base ** step, dtype)
        return self._constants["pow", base, dtype]

    @staticmethod
    def assign(var, value):
        var.assign(value)

    @staticmethod
    def all_finite(values):
        """Whether every element of every one of ``values`` is finite."""
        return all_finite(values)

    def when(self, flag, update, refs):
        """``update()`` (which assigns ``refs`` in place) run only where ``flag`` holds: a ``tf.cond``, whose branch
        makes its own constants (one made inside a branch cannot be used outside it)."""
        kept = self._constants

        def run():
            self._constants = {}
            update()
            return tf.constant(True)
        try:
            tf.cond(flag, run, lambda: tf.constant(False))
        finally:
            self._constants = kept

    def apply_sgd(self, var, grad, m, lr, momentum, nesterov):
        """``m = momentum * m - lr * g; var += m`` (nesterov: ``var += momentum * m - lr * g``); no ``m``:
        ``var -= lr * g``."""
        dt = var.dtype
        if m is None:
            tf.raw_ops.ResourceApplyGradientDescent(var=var.handle, alpha=tf.cast(lr, dt), delta=tf.cast(grad, dt))
        else:
            tf.raw_ops.ResourceApplyKerasMomentum(var=var.handle, accum=m.handle, lr=tf.cast(lr, dt),
                                                  grad=tf.cast(grad, dt), momentum=self.constant(momentum, dt),
                                                  use_nesterov=nesterov)

    def apply_adam(self, var, m, v, grad, lr, step, beta_1, beta_2, epsilon):
        """Keras' Adam: ``m += (g - m)(1 - b1); v += (g² - v)(1 - b2); var -= lr_t m / (√v + ε)`` with
        ``lr_t = lr √(1 - b2^t) / (1 - b1^t)``."""
        dt = var.dtype
        tf.raw_ops.ResourceApplyAdam(var=var.handle, m=m.handle, v=v.handle, beta1_power=self.power(beta_1, step, dt),
                                     beta2_power=self.power(beta_2, step, dt), lr=tf.cast(lr, dt),
                                     beta1=self.constant(beta_1, dt), beta2=self.constant(beta_2, dt),
                                     epsilon=self.constant(epsilon, dt), grad=tf.cast(grad, dt))


class BaseExecutable(Executable):
    """A Program bound to a runtime (``backend_common.Executable``); each call is handed its variables' engine
    handles by path."""

    def __init__(self, runtime, program, plan, seed):
        super().__init__(runtime, program, plan, seed)
        self._check_placements()
        self.slot_vars = program.slots
        self._slot_paths = [s.path for v in program.trainable for s in self.slot_vars[v.path]]
        self._state_paths = [s.path for s in program.state]     # the optimizer's own state (a loss scale)
        self._handles = None

    def _bind(self, handles):
        """Take the step's handles; when one is new (a value moved: a view switch and back, new layout rules),
        ``_retrace`` drops the traced functions that captured the old ones."""
        if handles is self._handles:
            return      # every step: nothing moved
        moved = self._handles is None or any(handles[k] is not self._handles.get(k) for k in handles)
        self._handles = handles
        if moved:
            self._retrace()

    def _check_placements(self):
        placements.check_mirrored(self.program)

    def _retrace(self):
        raise NotImplementedError

    def _apply_copies(self, copies, grads, updates, lr, step, update=True, norms=None, finite=None):
        """The optimizer step of one device (``_apply_fn``, traced once for all) on ``copies``, its variables by
        path: its copies (mirrored view) or the blocks it holds (consistent view).  A variable the device does not
        hold (placed on other devices) comes as None, with its gradient, and is left to the devices holding it.
        ``norms``: per variable, the gradient norm its clipping uses (``Optimizer.clipping_norms``); ``finite``:
        whether every whole gradient is finite (None: found from ``grads``, whole ones)."""
        p = self.program
        self._apply_fn(grads, updates, [copies.get(v.path) for v in p.trainable],
                       [copies.get(k) for k in self._slot_paths + self._state_paths],
                       [copies.get(v.path) for v, _ in p.updates], lr, step, update, norms, finite)

    def loss_scale(self, handles):
        """The factor the loss is multiplied by before the gradients (the optimizer's loss scale), or None."""
        p = self.program
        return p.optimizer.loss_scale([handles[k] for k in self._state_paths]) if p.state else None

    @property
    def _clips_by_norm(self):
        opt = self.program.optimizer
        return bool(opt is not None and opt.clips_by_norm and self.program.trainable)

    def _norms(self, squared):
        """Per variable, the norm its clipping uses, from each whole gradient's sum of squares (float32)."""
        return self.program.optimizer.clipping_norms(TFMath(), squared)

    def _apply(self, grads, updates, trainable, slots, updated, lr, step, update=True, norms=None, finite=None):
        """The optimizer rule on one device's variables, and the state updates; elementwise, so a block of a
        variable is updated by the same block of its gradient as the whole would be (clipping by norm takes the
        whole gradient's norm, a loss scale's check whether every whole gradient is finite)."""
        p, slots, xp = self.program, iter(slots), TFMath()
        step = tf.cast(step, tf.float32)
        per_var = [[next(slots) for _ in self.slot_vars[var.path]] for var in p.trainable]
        state = list(slots)
        grads = [None if h is None else tf.cast(g, h.dtype) for g, h in zip(grads, trainable)]
        if norms is not None:
            norms = [None if n is None or h is None else tf.cast(n, h.dtype) for n, h in zip(norms, trainable)]
        p.optimizer.apply_all(xp, p.trainable, trainable, grads, per_var, lr, step, update, norms, state, finite)
        for handle, value in zip(updated, updates):
            if handle is not None:
                handle.assign(tf.cast(value, handle.dtype))


def all_finite(values):
    """One boolean: whether every element of every one of ``values`` is finite."""
    flags = [tf.reduce_all(tf.math.is_finite(v)) for v in values]
    return tf.reduce_all(tf.stack(flags)) if flags else tf.constant(True)


def squared(g):
    """A gradient's (or a block's) sum of squares, in float32."""
    g = tf.cast(g, tf.float32)
    return tf.reduce_sum(g * g)
