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


class Executable:
    def __init__(self, runtime, program):
        self.runtime, self.program = runtime, program
        self.slot_vars = program.slots()
        self._handles = None
        self._fn = None
        self._seed = config.seed()

    # Variables: materialised in this runtime, re-fetched if they moved (view switch and back)
    def _current_handles(self):
        p = self.program
        variables = list(p.variables) + [s for slots in self.slot_vars.values() for s in slots]
        handles = {v.path: v._live_handle(self.runtime) for v in variables}
        if self._handles is None or any(handles[k] is not self._handles[k] for k in handles):
            self._handles = handles
            self._fn = tf.function(self._step, jit_compile=p.jit_compile or None, reduce_retracing=True)
        return handles

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
        if p.loss is not None:
            for var, grad in zip(p.trainable, grads):
                slots = [self._handles[s.path] for s in self.slot_vars[var.path]]
                strategy.extended.update(self._handles[var.path], self._apply, args=(grad, *slots),
                                         kwargs={"lr": lr, "step": step}, group=False)
        for (var, _), value in zip(p.updates, updates):
            strategy.extended.update(self._handles[var.path], lambda v, x: v.assign(x), args=(value,), group=False)
        return outs

    def _apply(self, var, grad, *slots, lr, step):
        self.program.optimizer.update(TFMath, var, grad, list(slots), lr, tf.cast(step, tf.float32))

    def _replica_step(self, *feeds, step):
        p = self.program
        rctx = tf.distribute.get_replica_context()
        ctx = LoweringContext(p.phase, step, self._seed, self.runtime.native_nchw, rctx.replica_id_in_sync_group)
        env = dict(zip(p.inputs, feeds))
        n = self.runtime.num_replicas
        grads, updates = [], []
        if p.loss is not None:
            trainable = [self._handles[v.path] for v in p.trainable]
            with tf.GradientTape() as tape:
                run_graph(p.nodes, env, self._handles, ctx)
                loss = tf.cast(env[p.loss], tf.float32)
                local_sum = tf.reduce_sum(loss)
            count = rctx.all_reduce("sum", tf.cast(tf.size(loss), tf.float32))
            grads = tape.gradient(local_sum, trainable, unconnected_gradients=tf.UnconnectedGradients.ZERO)
            grads = rctx.all_reduce("sum", [tf.convert_to_tensor(g) / count for g in grads])
            updates = [rctx.all_reduce("sum", env[b]) / n if n > 1 else env[b] for _, b in p.updates]
        else:
            run_graph(p.nodes, env, self._handles, ctx)
        outs = []
        for blob, mode in zip(p.outputs, p.output_modes):
            value = env[blob]
            outs.append(rctx.all_reduce("sum", tf.reduce_sum(value)) if mode == "sum" else value)
        return grads, updates, outs
