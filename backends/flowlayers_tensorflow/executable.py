"""One compiled Program for a strategy runtime: a single tf.function per step.

Train step, per replica: forward, the loss summed locally and divided by the
element count of the whole logical batch, gradients all-reduced (SUM) — so N
replicas compute exactly the one-device mean gradient, even for uneven last
batches.  The optimizer rule then runs on every replica's copy of each
variable through ``strategy.extended.update``.
"""
import tensorflow as tf

from flowlayers import config
from flowlayers.errors import FlowLayersError

from .lowering import LoweringContext, run_graph


class TFMath:
    """The array namespace optimizer rules are written against."""
    sqrt = staticmethod(tf.sqrt)

    @staticmethod
    def assign(var, value):
        var.assign(value)


class BaseExecutable:
    """A Program bound to a runtime; its variables (and optimizer slots) live in that runtime."""

    def __init__(self, runtime, program):
        self.runtime, self.program = runtime, program
        self.slot_vars = program.slots()
        self._handles = None
        self._seed = config.seed()

    def _current_handles(self):
        """Engine handles by path, materialised here; when one moved (a view switch and back),
        ``_retrace`` drops the traced functions that captured the old ones."""
        variables = list(self.program.variables) + [s for slots in self.slot_vars.values() for s in slots]
        handles = {v.path: v._live_handle(self.runtime) for v in variables}
        if self._handles is None or any(handles[k] is not self._handles[k] for k in handles):
            self._handles = handles
            self._retrace()
        return handles

    def _retrace(self):
        raise NotImplementedError


class Executable(BaseExecutable):
    def _retrace(self):
        self._fn = tf.function(self._step, reduce_retracing=True, autograph=False)
        # XLA compiles each replica's forward and backward; collectives and updates stay outside
        self._compute = self._local
        if self.program.jit_compile:
            self._compute = tf.function(self._local, jit_compile=True, autograph=False)

    def __call__(self, feeds, lr=0.0, step=1):
        self._current_handles()
        placed = [self.runtime.place(f, x.node.attrs["kind"]) for f, x in zip(feeds, self.program.inputs)]
        try:
            outs = self._fn(placed, tf.constant(lr, tf.float32), tf.constant(step, tf.int64))
        except FlowLayersError:
            raise
        except tf.errors.OpError as e:
            raise self.runtime.wrap_error(self.program, e) from None
        return [self.runtime.fetch(o, m) for o, m in zip(outs, self.program.output_modes)]

    # The traced step ----------------------------------------------------
    def _step(self, feeds, lr, step):
        p, strategy = self.program, self.runtime.strategy
        results = strategy.run(self._replica_step, args=tuple(feeds) if feeds else (), kwargs={"step": step})
        grads, updates, outs = results
        # Outputs that read a variable but feed no gradient are not ordered before its update by TF's automatic
        # control dependencies: seen returning post-update values (tests/parallel/test_signatures.py). Order them.
        with tf.control_dependencies([t for o in outs for t in strategy.experimental_local_results(o)]):
            if p.loss is not None:
                for var, grad in zip(p.trainable, grads):
                    slots = [self._handles[s.path] for s in self.slot_vars[var.path]]
                    strategy.extended.update(self._handles[var.path], self._apply, args=(grad, *slots),
                                             kwargs={"lr": lr, "step": step}, group=False)
            for (var, _), value in zip(p.updates, updates):
                strategy.extended.update(self._handles[var.path], lambda v, x: v.assign(x), args=(value,),
                                         group=False)
        return outs

    def _apply(self, var, grad, *slots, lr, step):
        self.program.optimizer.update(TFMath, var, grad, list(slots), lr, tf.cast(step, tf.float32))

    def _replica_step(self, *feeds, step):
        p = self.program
        rctx = tf.distribute.get_replica_context()
        local_sum, size, grads, updates, outs = self._compute(list(feeds), step, rctx.replica_id_in_sync_group)
        n = self.runtime.num_replicas
        if p.loss is not None:
            count = rctx.all_reduce("sum", size)
            grads = rctx.all_reduce("sum", [g / count for g in grads])
            updates = [rctx.all_reduce("sum", u) / n if n > 1 else u for u in updates]
        outs = [rctx.all_reduce("sum", o) if mode == "sum" else o for o, mode in zip(outs, p.output_modes)]
        return grads, updates, outs

    def _local(self, feeds, step, replica_id):
        """One replica's forward (and backward): no collectives, so XLA may compile it whole."""
        p = self.program
        ctx = LoweringContext(p.phase, step, self._seed, self.runtime.native_nchw, replica_id)
        env = dict(zip(p.inputs, feeds))
        local_sum, size, grads = tf.constant(0.0), tf.constant(0.0), []
        if p.loss is not None:
            trainable = [self._handles[v.path] for v in p.trainable]
            with tf.GradientTape() as tape:
                run_graph(p.nodes, env, self._handles, ctx)
                loss = tf.cast(env[p.loss], tf.float32)
                local_sum = tf.reduce_sum(loss)
            size = tf.cast(tf.size(loss), tf.float32)
            grads = tape.gradient(local_sum, trainable, unconnected_gradients=tf.UnconnectedGradients.ZERO)
            grads = [tf.convert_to_tensor(g) for g in grads]
        else:
            run_graph(p.nodes, env, self._handles, ctx)
        updates = [env[b] for _, b in p.updates]
        outs = [tf.reduce_sum(env[b]) if mode == "sum" else env[b] for b, mode in zip(p.outputs, p.output_modes)]
        return local_sum, size, grads, updates, outs
