"""Steps with placements on some devices (``flow.scope.placement("gpu", "0:1")``) in the consistent view.

XLA compiles a program for one set of devices, so one ``jax.jit`` cannot run some ops on some devices only.  Such a
step is cut into stages, each a run of consecutive ops of one placement, each its own ``jax.jit`` on its devices:
a placement's stage on a mesh of its devices (every Blob whole on each, as the plan places it), a stage of all
devices on the whole mesh with the plan's shardings.  A Blob crossing from one stage to a later one is copied to
the later stage's devices between the programs (``jax.device_put``), and its gradient copied back.

The backward pass runs the stages in reverse, each a ``jax.jit`` of the ``jax.vjp`` of its forward: it computes
that stage's forward again (activations are not kept between programs; a dropout draw depends on (seed, op, step)
only, so it repeats).  A variable's gradient is summed where the variable lives; the optimizer rule then runs per
device set, on the variables held there: rules that need every gradient at once (``global_clipnorm``, a loss
scale's finiteness check) are refused by name.
"""
import functools

import jax
import jax.numpy as jnp
import numpy as np

from flowlayers.backend_common import StagedSteps, functional, micro_batches, placement_stages
from flowlayers.errors import ConfigError

from .consistent import ConsistentExecutable
from .executable import host, settle
from .lowering import Context, PlannedContext, _run_node


class PlacedExecutable(StagedSteps, ConsistentExecutable):
    """The consistent view's executable for a step with placements on some devices: the stages' loop is
    ``backend_common.StagedSteps``; here each stage's ``jax.jit`` programs and the copies between them."""
    def _check_placements(self):
        p, rt = self.program, self.runtime
        placed = next(n for n in p.nodes if n.placement is not None)
        where = ",".join(f"0:{d}" for d in placed.placement)
        if rt.cluster is not None:
            raise ConfigError(f"op {placed.name!r} of {p.name!r} was built under flow.scope.placement on devices "
                              f"{where}: expected one process on the jax backend for placements on some devices, "
                              f"received a job of {rt.cluster.count} processes; run it in one process")
        rule = p.optimizer
        if rule is not None and (p.state or rule.global_clipnorm or rule.checks_finite):
            what = "a loss scale" if p.state or rule.checks_finite else "global_clipnorm"
            raise ConfigError(f"{p.name!r}: op {placed.name!r} is placed on devices {where}; expected an optimizer "
                              f"whose rule runs on each device set alone, received one with {what}, which needs "
                              f"every gradient at once (the jax backend updates the variables of each placement "
                              f"on its devices); drop it, or the placement")
        self._stages = placement_stages(p)
        self._stage_fns, self._rules = {}, {}

    def _can_scan(self):
        return False

    def compiled_text(self, feeds, handles, lr=0.0, step=1):
        raise ConfigError(f"step {self.program.name!r}: expected a step compiled as one program, received one with "
                          f"placements on some devices, which the jax backend runs as one program per stage")

    def __call__(self, feeds, handles, lr=0.0, step=1):
        p = self.program
        self._bind(handles)
        chunks = micro_batches(feeds, p.micro_batches if p.loss is not None else 1)
        sizes = [len(c[0]) if c and np.ndim(c[0]) else None for c in chunks]
        update = self.updates_variables(step)
        step_fn = functools.partial(self._step, sizes, update)
        outs = self._called(self._run(step_fn, chunks, *self._scalars(lr, step)), step + 1)
        return [o if mode == "sum" else host(o) for o, mode in zip(outs, self._modes)]

    # Where a stage's values live ----------------------------------------
    def _target(self, stage, blob, plan):
        """The sharding ``stage`` reads ``blob`` in: a placement's, whole on each of its devices; else the plan's."""
        rt, rank = self.runtime, len(blob.shape)
        if stage.placement is not None:
            return rt.placed_sharding(stage.placement, rank)
        if blob.node.op.kind == "variable":
            return self._handles[blob.node.variable.path].sharding
        return rt.sharding(plan.sbp[blob], rank)

    def _moved(self, value, sharding):
        return self._settled(jax.device_put(value, sharding))

    def _settled(self, values):
        """``values`` once ready, on several CPU devices: there one program with collectives runs at a time
        (``BaseExecutable._waits``), and the stages' programs follow each other closely."""
        return jax.block_until_ready(values) if self._waits else values

    # The step ----------------------------------------------------------
    def _step(self, sizes, update, trained, slots, updated, read, chunks, lr, running, step):
        p, rt = self.program, self.runtime
        if self._waits:
            settle()
        values = {**dict(zip(self._read, read)), **dict(zip(self._updated, updated)),
                  **dict(zip(self._trained, trained))}
        envs, grads, watched = self.staged_run(sizes, chunks, step, values)
        outs = [sum(jnp.sum(env[b]) for env in envs) if mode == "sum" else envs[0][b]
                for b, mode in zip(p.outputs, p.output_modes)]
        outs += watched
        sums = [o for o, m in zip(outs, self._modes) if m == "sum"]
        if sums:
            running = self._add_sums(running, [self._moved(s, rt.replicated()) for s in sums])
        new_trained, new_slots = self._update(trained, slots, grads, lr, step, update)
        news = [self._moved(envs[0][b].astype(self._handles[v.path].value.dtype), self._handles[v.path].sharding)
                for v, b in p.updates]
        return [*outs, running, step + 1], new_trained, new_slots, news or updated

    # The engine's half of StagedSteps -----------------------------------
    def _stage_input(self, stage, x, value, plan, values):
        if x.node.op.kind == "variable":
            value = values[x.node.variable.path]
        return self._moved(value, self._target(stage, x, plan))

    def _run_forward(self, stage, forward, d_args, c_args, at):
        return self._settled(forward(d_args, c_args, at))

    def _loss_cotangent(self, loss, scale):
        return jnp.full(loss.shape, scale, loss.dtype, device=loss.sharding)

    def _run_backward(self, stage, backward, d_args, c_args, at, given, scale, watched):
        return self._settled(backward(d_args, c_args, at, given, watched))

    def _add_gradient(self, path, g, held):
        g = self._moved(g, self._handles[path].sharding)
        return g if held is None else held + g

    def _cotangent_as(self, g, value):
        return self._moved(g, value.sharding)

    def _functions(self, k, size, plan, diff):
        """Stage ``k``'s (forward, backward) jitted for micro-batches of ``size`` rows, the inputs marked in
        ``diff`` differentiated."""
        key = (k, size, diff)
        if key not in self._stage_fns:
            p, stage = self.program, self._stages[k]
            d_inputs = [x for x, d in zip(stage.inputs, diff) if d]
            c_inputs = [x for x, d in zip(stage.inputs, diff) if not d]
            floating = [b.dtype.is_floating for b in stage.outputs]
            watched = [b for b in p.gradients if b in stage.outputs]

            def run(d_args, c_args, step, probes=None):
                if stage.placement is None:
                    ctx = PlannedContext(p.phase, step, self.seed, plan, self.runtime.sharding)
                else:
                    ctx = Context(p.phase, step, self.seed)
                env = {**dict(zip(d_inputs, d_args)), **dict(zip(c_inputs, c_args))}
                for node in stage.nodes:
                    _run_node(node, env, {}, ctx, probes or {})
                return [ctx.whole(b, env[b]) for b in stage.outputs]

            def backward(d_args, c_args, step, given, watched_values):
                def differentiated(d, zeros):
                    outs = run(d, c_args, step, dict(zip(watched, zeros)))
                    return [o for o, f in zip(outs, floating) if f]

                zeros = [jnp.zeros_like(w) for w in watched_values]
                outs, vjp = jax.vjp(differentiated, list(d_args), zeros)
                cts = [jnp.zeros_like(o) if c is None else c.astype(o.dtype) for o, c in zip(outs, given)]
                return vjp(cts)

            self._stage_fns[key] = (jax.jit(run), jax.jit(backward))
        return self._stage_fns[key]

    def _stage_step(self, stage, step):
        """The step number (a device scalar of the whole mesh) on ``stage``'s devices."""
        if stage.placement is None:
            return step
        return self._moved(step, self.runtime.placed_sharding(stage.placement, 0))

    def _add_sums(self, running, sums):
        if "add_sums" not in self._rules:
            self._rules["add_sums"] = jax.jit(
                lambda running, sums: running + jnp.stack([jnp.sum(s, dtype=jnp.float64) for s in sums]))
        return self._settled(self._rules["add_sums"](running, sums))

    # The update, per device set ----------------------------------------
    def _update(self, trained, slots, grads, lr, step, update):
        """New trained values and slots: the rule run once per device set, on the variables held there."""
        p = self.program
        if p.optimizer is None or not trained:
            return trained, slots
        per_var, flat = [], iter(slots)
        for n in self._slot_counts:
            per_var.append([next(flat) for _ in range(n)])
        groups = {}
        for i, path in enumerate(self._trained):
            groups.setdefault(frozenset(self._handles[path].sharding.device_set), []).append(i)
        new_trained, new_slots = list(trained), [list(s) for s in per_var]
        for members in groups.values():
            sharding = self._handles[self._trained[members[0]]].sharding
            whole = jax.sharding.NamedSharding(sharding.mesh, jax.sharding.PartitionSpec())
            key = (tuple(members), update)
            if key not in self._rules:
                self._rules[key] = jax.jit(functools.partial(self._rule, members, update))
            gs = [grads[self._trained[i]] if self._trained[i] in grads else jnp.zeros_like(trained[i])
                  for i in members]
            values, group_slots = self._settled(self._rules[key](
                [trained[i] for i in members], gs, [per_var[i] for i in members], self._moved(lr, whole),
                self._moved(step, whole)))
            for i, v, s in zip(members, values, group_slots):
                new_trained[i], new_slots[i] = v, s
        return new_trained, [s for group in new_slots for s in group]

    def _rule(self, members, update, values, grads, slots, lr, step):
        p = self.program
        variables = [p.trainable[i] for i in members]
        grads = [g.astype(v.dtype) for g, v in zip(grads, values)]
        values, slots, _ = functional.stateful_step(p.optimizer, self._math, variables, values, grads, slots, lr,
                                                    step, update, [])
        return values, slots

