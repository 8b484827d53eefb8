"""One compiled Program for a strategy runtime (one device, or the mirrored view on N): one tf.function per step.

Train step: on each device, that replica's forward and backward (the loss summed locally, gradients of that
sum) — one traced function, called once per device with that device's copies of the variables as arguments,
so it is traced once whatever N.  Then one all-reduce (SUM, see ``StrategyRuntime.all_reduce``) of everything
the replicas must agree on: element counts, gradients, layer state updates and summed outputs; the gradients
are divided by the global element count, so N replicas compute the one-device mean gradient, even for uneven
last batches.  Then the optimizer rule on every device's copy (a second shared traced function).
"""
import tensorflow as tf

from flowlayers.errors import FlowLayersError

from . import placements
from .graph_options import step_options
from .lowering import LoweringContext
from .step import forward_backward, outputs


class TFMath:
    """The array namespace optimizer rules are written against, with TF's kernels for whole rules: one op per
    variable instead of five to fifteen, so a deep model's update step traces and compiles several times faster
    (on DTensor each op costs SPMD expansion).  They compute the rules' arithmetic in the same order."""
    sqrt = staticmethod(tf.sqrt)
    minimum = staticmethod(tf.minimum)
    maximum = staticmethod(tf.maximum)
    clip = staticmethod(tf.clip_by_value)

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


class BaseExecutable:
    """A Program bound to a runtime, with ``plan(batch)`` (consistent view: the front end's Plan for a fed batch
    size) and the global ``seed`` of dropout; each call is handed its variables' engine handles by path."""

    def __init__(self, runtime, program, plan, seed):
        self.runtime, self.program, self.plan, self.seed = runtime, program, plan, seed
        self._check_placements()
        self.slot_vars = program.slots()
        self._slot_paths = [s.path for v in program.trainable for s in self.slot_vars[v.path]]
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

    def _updates_variables(self, step):
        """Whether step ``step`` applies the rule (False: it only accumulates the gradient)."""
        return self.program.optimizer is None or self.program.optimizer.is_update_step(step)

    def _retrace(self):
        raise NotImplementedError

    def _apply_copies(self, copies, grads, updates, lr, step, update=True, norms=None):
        """The optimizer step of one device (``_apply_fn``, traced once for all) on ``copies``, its variables by
        path: its copies (mirrored view) or the blocks it holds (consistent view).  A variable the device does not
        hold (placed on other devices) comes as None, with its gradient, and is left to the devices holding it.
        ``norms``: per variable, the gradient norm its clipping uses (``Optimizer.clipping_norms``)."""
        p = self.program
        self._apply_fn(grads, updates, [copies.get(v.path) for v in p.trainable],
                       [copies.get(k) for k in self._slot_paths], [copies.get(v.path) for v, _ in p.updates], lr, step,
                       update, norms)

    @property
    def _clips_by_norm(self):
        opt = self.program.optimizer
        return bool(opt is not None and opt.clips_by_norm and self.program.trainable)

    def _norms(self, squared):
        """Per variable, the norm its clipping uses, from each whole gradient's sum of squares (float32)."""
        return self.program.optimizer.clipping_norms(TFMath(), squared)

    def _apply(self, grads, updates, trainable, slots, updated, lr, step, update=True, norms=None):
        """The optimizer rule on one device's variables, and the state updates; elementwise, so a block of a
        variable is updated by the same block of its gradient as the whole would be (clipping by norm takes the
        whole gradient's norm)."""
        p, slots, xp = self.program, iter(slots), TFMath()
        step = tf.cast(step, tf.float32)
        for var, handle, grad, norm in zip(p.trainable, trainable, grads, norms or [None] * len(p.trainable)):
            var_slots = [next(slots) for _ in self.slot_vars[var.path]]
            if handle is not None:
                p.optimizer.apply_gradient(xp, handle, tf.cast(grad, handle.dtype), var_slots, lr, step, update,
                                           p.optimizer.decays(var), None if norm is None else tf.cast(norm, handle.dtype))
        for handle, value in zip(updated, updates):
            if handle is not None:
                handle.assign(tf.cast(value, handle.dtype))


class Executable(BaseExecutable):
    def _retrace(self):
        p = self.program
        self._fn = tf.function(self._step, reduce_retracing=True, autograph=False)
        # On N devices, the replica's step and the update are functions traced once and called per device; on one
        # they are inlined (a call with hundreds of variable arguments costs more there than it saves).  XLA, if
        # asked, compiles each replica's forward and backward; the collective and updates stay outside.
        shared = self.runtime.num_replicas > 1
        self._local_fn, self._apply_fn = self._local, self._apply
        if shared or p.jit_compile:
            self._local_fn = tf.function(self._local, reduce_retracing=True, autograph=False,
                                         jit_compile=p.jit_compile or None)
        if shared:
            self._apply_fn = tf.function(self._apply, autograph=False)
        self._paths = [v.path for v in p.variables]

    def __call__(self, feeds, handles, lr=0.0, step=1):
        self._bind(handles)
        kinds = [x.node.attrs["kind"] for x in self.program.inputs]
        placed = [self.runtime.place(f, kind) for f, kind in zip(feeds, kinds)]
        rows = [len(f) for f, kind in zip(feeds, kinds) if kind != "list"]
        active = min([self.runtime.num_replicas] + rows[:1])     # replicas with rows: a batch may be smaller
        try:
            with step_options(cpu=not self.runtime.native_nchw):
                outs = self._fn(placed, tf.constant(lr, tf.float32), tf.constant(step, tf.int64), active,
                                self._updates_variables(step))
        except FlowLayersError:
            raise
        except tf.errors.OpError as e:
            raise self.runtime.wrap_error(self.program, e) from None
        modes = self.program.output_modes + ["numpy"] * len(self.program.gradients)
        return [self.runtime.fetch(o, m) for o, m in zip(outs, modes)]

    # The traced step ----------------------------------------------------
    def _step(self, feeds, lr, step, active, update=True):
        """``feeds``: per input, one tensor per device; the first ``active`` devices have rows (a batch smaller
        than the device count leaves the others none).  Returns per output one tensor per device."""
        p, rt = self.program, self.runtime
        n, modes = rt.num_replicas, p.output_modes
        copies = [rt.local_variables(self._handles, i) for i in range(n)]
        replicas = []
        for i, device in enumerate(rt.devices):
            with tf.device(device):
                if i < active:
                    replicas.append(self._local_fn([f[i] for f in feeds], [copies[i][k] for k in self._paths],
                                                   step, tf.constant(i)))
                else:   # no rows: nothing to run (TF's kernels fail on some empty batches), zeros to the sums
                    replicas.append(_idle(replicas[0], modes))
        # what the replicas agree on, summed over them: element count, gradients, state updates, summed outputs
        shared = [[size] + grads + updates + [o for o, m in zip(outs, modes) if m == "sum"]
                  for size, grads, updates, outs in replicas]
        if n > 1 and (p.loss is not None or p.updates or "sum" in modes):
            shared = rt.all_reduce(shared)
        results, means = [], {}
        for i, device in enumerate(rt.devices):
            _, grads, updates, outs = replicas[i]
            count, rest = shared[i][0], iter(shared[i][1:])
            grads = [_mean(means, next(rest), count, device) for _ in grads]
            updates = [_mean(means, next(rest), active, device) if active > 1 else next(rest) for _ in updates]
            watched = outs[len(modes):]          # this replica's rows of d(sum of its losses)/d(blob)
            with tf.device(device):
                watched = [g / tf.cast(count, g.dtype) for g in watched]
            results.append([next(rest) if m == "sum" else o for o, m in zip(outs, modes)] + watched)
            if p.loss is not None or p.updates:
                # the outputs first: one that reads a variable without feeding a gradient must not see the update
                with tf.device(device), tf.control_dependencies(results[-1]):
                    norms = self._norms([squared(g) for g in grads]) if self._clips_by_norm else None
                    self._apply_copies(copies[i], grads, updates, lr, step, update, norms)     # whole gradients
        return [list(per_output) for per_output in zip(*results)]

    def _local(self, feeds, variables, step, replica_id):
        """One replica's forward (and backward) on its copies of the variables: no collectives, so XLA may
        compile it whole.  Returns (element count, gradients of the local loss sum, state updates, outputs).
        With micro-batches, its rows run as that many independent chains that meet in the loss sum."""
        p = self.program
        ctx = LoweringContext(p.phase, step, self.seed, self.runtime.native_nchw, replica_id)
        chunks = _micro_batches(feeds, p.micro_batches if p.loss is not None else 1)
        envs, size, grads, watched = forward_backward(p, chunks, dict(zip(self._paths, variables)),
                                                      [ctx] * len(chunks))
        return size, grads, [envs[0][b] for _, b in p.updates], outputs(p, envs) + watched


def squared(g):
    """A gradient's (or a block's) sum of squares, in float32."""
    g = tf.cast(g, tf.float32)
    return tf.reduce_sum(g * g)


def _micro_batches(feeds, n):
    """A replica's feeds -> ``n`` lists of them, each a run of consecutive rows (sizes differ by one at most; a
    replica with fewer rows than ``n`` runs some empty ones)."""
    if n == 1 or not feeds:
        return [list(feeds)]
    rows = tf.shape(feeds[0])[0]
    bounds = [rows * k // n for k in range(n + 1)]
    return [[f[bounds[k]:bounds[k + 1]] for f in feeds] for k in range(n)]


def _idle(busy, modes):
    """What a replica without rows contributes, shaped after a busy replica's: no elements, zero gradients and
    state updates (left out of the updates' mean), zero sums and empty per-sample outputs."""
    _, grads, updates, outs = busy
    sums = [tf.zeros_like(o) if m == "sum" else o[:0] for o, m in zip(outs, modes)]
    return (tf.constant(0.0), [tf.zeros_like(g) for g in grads], [tf.zeros_like(u) for u in updates],
            sums + [g[:0] for g in outs[len(modes):]])     # then no rows of the watched gradients


def _mean(means, total, count, device):
    """``total / count`` on ``device``, computed once per total: where the all-reduce hands every device the same
    tensor (logical CPU devices read the sum in place), one division serves them all instead of one each (a full
    pass over every gradient per device: bench/RESULTS_design.md)."""
    if id(total) not in means:     # (every device's count is the same number)
        with tf.device(device):
            means[id(total)] = total / tf.cast(count, total.dtype)
    return means[id(total)]
