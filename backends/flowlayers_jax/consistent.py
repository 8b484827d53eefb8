"""The consistent view: one logical array per Blob, sharded over the mesh as planned, in one ``jax.jit`` per step.

The batch is placed on the devices by its planned sharding (each device receives its block only); every Blob is
constrained to its planned ``NamedSharding`` and every op's inputs to its signature's, so XLA's partitioner
inserts the collectives the plan's Boxing lists.  Gradients are of the mean loss over the logical batch; the
optimizer rule runs on the logical arrays, each device updating the blocks it holds.
"""
import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import NamedSharding, PartitionSpec

from flowlayers.backend_common import micro_batches, step_by_step

from .executable import BaseExecutable, host, loss_terms, probes, summed
from .lowering import PlannedContext, run_graph
from .rows import made_rows, rows_of, stacked_feeds, with_next_row


class ConsistentExecutable(BaseExecutable):
    def __call__(self, feeds, handles, lr=0.0, step=1):
        p = self.program
        self._bind(handles)
        chunks = micro_batches(feeds, p.micro_batches if p.loss is not None else 1)
        sizes = tuple(len(c[0]) if c and np.ndim(c[0]) else None for c in chunks)
        update = self.updates_variables(step)
        fn = self._jit((sizes, update), lambda: self._step_of(sizes, update, chunks))
        outs = self._called(self._run(fn, chunks, *self._scalars(lr, step)), step + 1)
        # a sum (a loss or metric total) stays on the devices until the host reads it: the next step goes ahead
        return [o if mode == "sum" else host(o) for o, mode in zip(outs, self._modes)]

    def _step_of(self, sizes, update, chunks):
        """What ``_jit`` compiles for micro-batches of ``sizes`` rows: (step, training, argument shardings)."""
        p, rt = self.program, self.runtime
        plans = [self.plan(size) for size in sizes]
        # each device receives its block of the batch only: the planned sharding of each input
        placed = [[rt.sharding(plan.sbp[x], np.ndim(f)) for f, x in zip(chunk, p.inputs)]
                  for chunk, plan in zip(chunks, plans)]
        return (self._counted(lambda *a: self._step(plans, update, *a)), p.phase == "train",
                [placed, rt.replicated(), rt.replicated(1), rt.replicated()])

    def steps(self, feeds, handles, lrs, first_step):
        """Several steps as one scanned ``jax.jit``, a training array's rows gathered on the devices."""
        p, rt = self.program, self.runtime
        if not self._scans:
            return step_by_step(self, feeds, handles, lrs, first_step)
        self._bind(handles)
        sources, xs, uses, made, start = stacked_feeds(feeds, rt.stage)
        rows = rows_of(feeds)

        def build():
            plan = self.plan(rows)
            shardings = [None] * len(xs)
            for x, source, u in zip(p.inputs, sources, uses):
                # the steps' axis whole on every device; each step's rows (or feed) laid out as the plan places them
                spec = rt.spec(plan.sbp[x], len(x.shape))
                shardings[u] = NamedSharding(rt.mesh, PartitionSpec(None, *(spec[:1] if source is not None else spec)))

            def scanned(trained, slots, updated, read, sources, first_row, xs, lrs, first):
                xs = [jax.lax.with_sharding_constraint(x, s) if m else x for x, s, m in
                      zip(made_rows(xs, made, first_row, lrs.shape[0], rows), shardings, made)]
                outs, *carry = self._scanned(
                    lambda t, s, u, read, f, lr, step: self._step([plan], True, t, s, u, read,
                                                                  [_pinned(f, plan, p, rt)], lr, step), uses,
                    trained, slots, updated, read, sources, xs, lrs, first)
                outs = with_next_row(outs, made, first_row, lrs.shape[0], rows)
                # the loop's final values kept in the variables' shardings too: the partitioner may lay out a loop's
                # results otherwise (a replicated bias came back split over "model" on a (model, data) mesh)
                return outs, *[self._keep(group, k) for k, group in enumerate(carry)]

            placed = [rt.replicated(1) if m else s for s, m in zip(shardings, made)]
            return (self._counted(scanned, steps=True), p.phase == "train",
                    [[None if s is None else rt.replicated(s.ndim) for s in sources], rt.replicated(), placed,
                     rt.replicated(1), rt.replicated(1), rt.replicated()])

        fn = self._jit(("steps", rows, tuple(s is None for s in sources), uses, made), build)
        return self._run_steps(fn, sources, xs, start, rows, lrs, first_step)

    def _step(self, plans, update, trained, slots, updated, read, chunks, lr, step):
        p = self.program
        values = {**dict(zip(self._read, read)), **dict(zip(self._updated, updated))}
        contexts = [PlannedContext(p.phase, step, self.seed, plan, self.runtime.sharding) for plan in plans]

        def forward(trained_values, probes):
            vals = {**values, **dict(zip(self._trained, trained_values))}
            envs = []
            for k, (chunk, ctx) in enumerate(zip(chunks, contexts)):
                envs.append(run_graph(p, dict(zip(p.inputs, chunk)), vals, ctx,
                                      dict(zip(p.gradients, probes)) if k == 0 else None))
            outs = [sum(summed(p, b, env[b]) for env in envs) if mode == "sum" else envs[0][b]
                    for b, mode in zip(p.outputs, p.output_modes)]
            news, seen = [envs[0][b] for _, b in p.updates], [envs[0][b] for b in p.gradients]
            if p.loss is None:
                return jnp.float32(0.0), (outs, news, seen)
            terms = [loss_terms(p, env) for env in envs]
            return self._scaled(sum(t for t, _ in terms) / sum(c for _, c in terms), slots), (outs, news, seen)

        if p.loss is None:
            _, (outs, news, _) = forward(trained, [])
            return outs, *self._apply(trained, [], slots, news, updated, lr, step, update)
        (_, (outs, news, _)), (grads, watched) = jax.value_and_grad(forward, argnums=(0, 1), has_aux=True)(
            trained, probes(forward, trained, p))
        return outs + self._unscaled(list(watched), slots), *self._apply(trained, grads, slots, news, updated, lr,
                                                                          step, update)


def _pinned(feeds, plan, program, runtime):
    """A step's feeds gathered on the devices, laid out as the plan places its inputs."""
    return [jax.lax.with_sharding_constraint(f, runtime.sharding(plan.sbp[x], f.ndim))
            for f, x in zip(feeds, program.inputs)]
