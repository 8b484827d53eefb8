"""What both views' executables share: a Program bound to a runtime, its variables split by how a step treats
them, the update half of a training step (the optimizer rules, functional, on ``jax.numpy``), and the call that
runs one compiled step on the boxes' arrays and puts the new arrays back.

A step is one ``jax.jit``: forward, backward and update, with the trained variables, their optimizer slots and
the state updated by the step (batch-norm statistics) donated, so XLA updates them in place.
"""
import jax
import jax.numpy as jnp
import numpy as np

from flowlayers.backend_common import Executable, functional
from flowlayers.contract import Pending
from flowlayers.errors import ConfigError, EngineError, FlowLayersError

from .rows import gathers_rows

# XLA:CPU runs convolutions and pooling inside a loop several times slower than alone (LeNet, 32 steps scanned on
# logical CPU devices: 6x slower per step, 100 s to compile): on CPUs their steps are dispatched one by one
WINDOWED = ("conv2d", "conv2d_transpose", "max_pool2d", "avg_pool2d")
_in_flight = [None]     # the arrays of the last step dispatched on several CPU devices (see BaseExecutable._waits)


def settle():
    """Wait for the program in flight on several CPU devices, if any (see BaseExecutable._waits)."""
    if _in_flight[0] is not None:
        jax.block_until_ready(_in_flight[0])
        _in_flight[0] = None


def in_flight(arrays):
    """``arrays`` are those of the program just dispatched on several CPU devices."""
    _in_flight[0] = arrays


class BaseExecutable(Executable):
    def __init__(self, runtime, program, plan, seed):
        super().__init__(runtime, program, plan, seed)
        self._check_placements()
        p = program
        slot_vars = p.slots
        self._trained = [v.path for v in p.trainable]
        # the slots of each trained variable, then the optimizer's own state (a loss scale), carried alike
        self._slots = [s.path for v in p.trainable for s in slot_vars[v.path]] + [s.path for s in p.state]
        self._slot_counts = [len(slot_vars[v.path]) for v in p.trainable]
        self._updated = list(dict.fromkeys(v.path for v, _ in p.updates))
        written = set(self._trained) | set(self._slots) | set(self._updated)
        self._read = [v.path for v in p.variables if v.path not in written]
        self._handles, self._fns, self._box_shardings = None, {}, None
        self._math = functional.FunctionalMath(jnp)
        self._lr = self._next_step = self._next_row = self._running = None
        self._lrs = {}
        self._modes = program.returned_modes
        # On several CPU devices a step is dispatched only once the step before (of any program) has ended; the
        # host still prepares it meanwhile.  XLA:CPU runs the devices' programs on one thread pool as large as the
        # cores: with two steps in flight, the devices done with the first can hold every thread waiting in the
        # second's all-reduce while the others still need one to finish the first (LeNet on 4 logical devices,
        # 2 cores: "Expected 4 threads to join the rendezvous, but only 2 of them arrived", the process aborted)
        # (several processes: each its own pool, the same rule within it)
        self._waits = runtime.waits
        self._scans = self._can_scan()
        self._compiling = False     # compiled_text: the next step compiled, not run

    def _check_placements(self):
        placed = next((n for n in self.program.nodes if n.placement is not None), None)
        if placed is not None:
            what = f"variable {placed.name!r}" if placed.op.kind == "variable" else f"op {placed.name!r}"
            where = ",".join(f"0:{d}" for d in placed.placement)
            raise _placement_error(what, self.program.name, where, self.runtime.view)

    def _bind(self, handles):
        """The step's boxes, in the order the traced step takes them, and the shardings new values keep."""
        if handles is not self._handles:
            self._handles = handles
            self._boxes = [[handles[k] for k in group] for group in
                           (self._trained, self._slots, self._updated, self._read)]
            shardings = [[b.sharding for b in group] for group in self._boxes]
            if shardings != self._box_shardings:
                self._fns = {}          # compiled for the layouts the values had
            self._box_shardings, self._shardings = shardings, shardings[:3]

    def compiled_text(self, feeds, handles, lr=0.0, step=1):
        """XLA's optimized program of the step ``feeds`` would run, after partitioning (the collectives it placed,
        its fusions), as text: compiled, not run.  (``XLA_FLAGS=--xla_dump_to=DIR`` writes every program.)"""
        self._compiling = True
        try:
            self(feeds, handles, lr, step)
        except _CompiledText as compiled:
            return compiled.text
        finally:
            self._compiling = False
        raise EngineError(f"step {self.program.name!r} ran instead of being compiled")

    def _run(self, fn, *args):
        """Run ``fn(trained, slots, updated, read, *args)`` on the boxes' arrays and put back the new arrays of the
        first three.  Returns what the step returns besides them."""
        arrays = [[b.value for b in group] for group in self._boxes]
        if self._compiling:
            raise _CompiledText(getattr(fn, "jitted", fn).lower(*arrays, *args).compile().as_text())
        try:
            out, *new = fn(*arrays, *args)
        except FlowLayersError:
            raise
        except jax.errors.JaxRuntimeError as e:
            raise EngineError(f"step {self.program.name!r} failed in the engine: {str(e).splitlines()[0]}; check "
                              f"the values this step receives: values computed inside the model are not checked "
                              f"before a step") from None
        for group, values in zip(self._boxes, new):
            for box, value in zip(group, values):
                box.value = value
        if self._waits:
            in_flight(new)
        # several processes: outputs spread over other processes' devices made whole here (runtime.whole)
        return self.runtime.whole(out) if self.runtime.cluster else out

    def _jit(self, key, build):
        """The step jitted for ``key`` (what the trace depends on besides shapes), made on its first use from
        ``build() -> (step_fn, training, shardings)``, so that a step already compiled builds nothing: in a training
        step the trained variables, slots and updated state are donated; ``shardings`` are those of the arguments
        after the variables.  Host arrays (the batch) are passed as they are, and placed by the compiled call
        itself: a ``jax.device_put`` of its own per step cost more than the rest of a small model's step
        (measured)."""
        fn = self._fns.get(key)
        if fn is None:
            step_fn, training, shardings = build()
            fn = jax.jit(step_fn, donate_argnums=(0, 1, 2) if training else (),
                         in_shardings=tuple(self._box_shardings) + tuple(shardings))
            rt = self.runtime
            if rt.cluster is not None:
                # several processes: jit takes no host array for devices of other processes; each process places
                # its own devices' blocks of the whole host values (runtime.put_all)
                fn = _placing(fn, lambda args: rt.put_all(args, list(shardings)), self._waits)
            elif self._waits:
                # the batch placed while the step before still runs, so that the wait ends in a dispatch only
                fn = _placing(fn, lambda args: jax.device_put(args, list(shardings)), True)
            self._fns[key] = fn
        return fn

    def _scalars(self, lr, step):
        """The step's rate, running totals and number on the devices: the rate kept while it stays, the totals and
        number the step before computed (``_counted``), so a step transfers only its batch (a transfer each costs,
        on a GPU, as much as a small model's step)."""
        if self._lr is None or self._lr[0] != lr:
            self._lr = (lr, self.runtime.put(np.float32(lr), self.runtime.replicated()))
        return self._lr[1], self._totals(), self._number(step)

    def _steps_scalars(self, lrs, first_step):
        """``_scalars`` of several steps: their rates (the last few kept), the running totals, the first
        step's number."""
        key = tuple(float(np.float32(lr)) for lr in lrs)
        placed = self._lrs.get(key)
        if placed is None:
            if len(self._lrs) >= 4:     # a schedule's rates change every call: keep the last few (a group, the last)
                self._lrs.clear()
            placed = self._lrs[key] = self.runtime.put(np.asarray(key, np.float32), self.runtime.replicated(1))
        return placed, self._totals(), self._number(first_step)

    def _totals(self):
        if self._running is None:
            self._running = self.runtime.put(np.zeros(self._modes.count("sum"), np.float64),
                                             self.runtime.replicated(1))
        return self._running

    def _number(self, step):
        known = self._next_step
        if known is not None and known[0] == step:
            return known[1]
        # placed as the step places the number it computes, so that both take one trace
        return self.runtime.put(np.float32(step), self.runtime.replicated())

    def _run_steps(self, fn, sources, xs, start, rows, lrs, first_step):
        """Run ``steps``' jitted ``fn`` (made with ``with_next_row``) on ``stacked_feeds``' ``sources`` and ``xs``:
        the first row of rows made on the devices (``start``) is the device scalar the steps before computed where
        these steps follow them, so that steps running through an epoch transfer no row numbers; the first row
        of the steps after, computed on the devices (just before the totals and the step number), is kept."""
        known, first_row = self._next_row, None
        if start is not None:
            first_row = (known[1] if known is not None and known[0] == start
                         else self.runtime.put(np.int32(start), self.runtime.replicated()))
        out = self._run(fn, sources, first_row, xs, *self._steps_scalars(lrs, first_step))
        if start is not None:
            self._next_row = (start + len(lrs) * rows, out.pop(-3))
        return self._called(out, first_step + len(lrs))

    def _counted(self, step_fn, steps=False):
        """``step_fn(..., lr, step)`` (``steps``: ``(..., lrs, first)``, one step per rate) taking also the running
        totals (after the rates): it returns besides its outputs the totals with its sums added, in float64, and
        the next step's number, both computed on the devices."""
        modes = self._modes

        def counted(*args):
            *rest, running, step = args
            outs, *new = step_fn(*rest, step)
            sums = [jnp.sum(o, dtype=jnp.float64) for o, m in zip(outs, modes) if m == "sum"]
            if sums:
                running = running + jnp.stack(sums)
            return [*outs, running, step + (rest[-1].shape[0] if steps else 1)], *new
        return counted

    def _called(self, outs, next_step):
        """The outputs of a ``_counted`` step, each sum pending (``RunningTotals``) with the totals before and
        after it; the totals and the number of step ``next_step`` kept for the step after."""
        *outs, running, number = outs
        self._next_step = (next_step, number)
        before, self._running = self._running, running
        sums = iter(range(self._modes.count("sum")))
        return [Pending((before, running, next(sums), o), RUNNING_TOTALS) if m == "sum" else o
                for o, m in zip(outs, self._modes)]

    def takes_rows(self, rows, sources):
        """Whether a step of ``rows`` rows of the whole training arrays ``sources`` runs faster gathering them from
        the arrays kept on the devices (``steps`` with ``Rows``) than fed them (``gathers_rows``; arrays too large
        to keep there would be gathered on the host instead)."""
        return self._scans and gathers_rows(self.runtime.platform, all(self.runtime.stages(s) for s in sources))

    def _can_scan(self):
        """Whether several steps can run as one scanned step: every output a sum (fit's and evaluate's steps),
        no micro-batches, and every step applying the rule (no gradient accumulation)."""
        p = self.program
        return (all(m == "sum" for m in p.output_modes) and not p.gradients and p.micro_batches == 1
                and not (p.optimizer is not None and p.optimizer.gradient_accumulation_steps)
                and not (self.runtime.platform == "cpu" and any(n.op.name in WINDOWED for n in p.nodes)))

    def _scanned(self, one_step, uses, trained, slots, updated, read, sources, xs, lrs, first):
        """``one_step(trained, slots, updated, read, feeds, lr, step) -> (outs, trained, slots, updated)`` over
        the steps of ``xs`` (input ``i`` takes ``xs[uses[i]]``: each step's rows of its staged ``sources`` entry,
        or its stacked feed; inputs taking the same rows share them), from step number ``first``, carrying the
        variables: one ``lax.scan``.  Returns the outputs stacked, and the final variables."""
        steps = first + jnp.arange(lrs.shape[0], dtype=jnp.float32)

        def body(carry, x):
            taken, lr, step = x
            feeds = [taken[u] if source is None else jnp.take(source, taken[u], axis=0)
                     for source, u in zip(sources, uses)]
            outs, *carry = one_step(*carry, read, feeds, lr, step)
            return tuple(carry), outs

        if lrs.shape[0] == 1:       # one step (fit's rows gathered step by step): no loop around it
            carry, outs = body((trained, slots, updated), jax.tree.map(lambda a: a[0], (xs, lrs, steps)))
            return jax.tree.map(lambda a: a[None], outs), *carry
        carry, outs = jax.lax.scan(body, (trained, slots, updated), (xs, lrs, steps))
        return outs, *carry

    # Inside the traced step ---------------------------------------------
    def _scaled(self, target, slots):
        """The loss a step differentiates: ``target`` times the optimizer's loss scale where it has one (read
        from its state, the last of ``slots``)."""
        p = self.program
        if not p.state:
            return target
        scale = p.optimizer.loss_scale(slots[len(slots) - len(p.state):])
        return target if scale is None else target * scale.astype(target.dtype)

    def _unscaled(self, watched, slots):
        """Watched gradients (``flow.watch_diff``) of a scaled loss, divided by the scale again."""
        p = self.program
        scale = p.optimizer.loss_scale(slots[len(slots) - len(p.state):]) if p.state else None
        return watched if scale is None else [w / scale.astype(w.dtype) for w in watched]

    def _apply(self, trained, grads, slots, updates, updated, lr, step, update):
        """New trained values and slots by the optimizer's rule (unchanged without one), and the new updated
        state, each kept in its variable's sharding and dtype."""
        p = self.program
        if p.optimizer is not None and trained:
            per_var, flat = [], iter(slots)
            for n in self._slot_counts:
                per_var.append([next(flat) for _ in range(n)])
            state = list(flat)
            grads = [g.astype(v.dtype) for g, v in zip(grads, trained)]
            trained, per_var, state = functional.stateful_step(p.optimizer, self._math, p.trainable, trained, grads,
                                                               per_var, lr, step, update, state)
            slots = [s for group in per_var for s in group] + state
        updated = [u.astype(v.dtype) for u, v in zip(updates, updated)] if updates else updated
        return [self._keep(group, k) for k, group in enumerate((trained, slots, updated))]

    def _keep(self, values, group):
        return [jax.lax.with_sharding_constraint(v, s) for v, s in zip(values, self._shardings[group])]


def _placing(fn, place, waits):
    """``fn`` (a jitted step) with its arguments after the variables' four groups placed by ``place`` first, then
    dispatched once the program in flight has ended where ``waits``."""
    def placed(*args):
        rest = place(list(args[4:]))
        if waits:
            settle()
        return fn(*args[:4], *rest)
    placed.jitted = fn
    return placed


class _CompiledText(Exception):
    """Ends a step that ``compiled_text`` only compiles, with the text."""
    def __init__(self, text):
        super().__init__("compiled, not run")
        self.text = text


def loss_terms(program, env, mask=None):
    """The sum of ``env``'s per-example losses (float32) and their element count; ``mask`` marks real rows."""
    loss = env[program.loss].astype(jnp.float32)
    if mask is None:
        return jnp.sum(loss), float(loss.size)
    rows = _rows(mask, loss)
    return jnp.sum(jnp.where(rows, loss, 0.0)), jnp.sum(mask).astype(jnp.float32) * (loss.size // max(len(mask), 1))


def summed(program, blob, value, mask=None):
    """A ``"sum"`` output's total over the elements (masked rows left out)."""
    if mask is not None and blob.shape and blob.shape[0] is None:
        value = jnp.where(_rows(mask, value), value, jnp.zeros((), value.dtype))
    return jnp.sum(value)


def _rows(mask, value):
    return mask.reshape(mask.shape + (1,) * (value.ndim - 1))


def probes(forward, trained, program, vary=lambda z: z):
    """Zeros shaped as each watched Blob (``flow.watch_diff``) where the step makes it, read from one abstract
    trace of ``forward`` without probes (its aux's last entry: the watched values): added there, a probe's
    gradient is the Blob's.  ``vary``: made to vary over the replicas (mirrored view)."""
    if not program.gradients:
        return []
    shapes = jax.eval_shape(lambda t: forward(t, [])[1][-1], trained)
    return [vary(jnp.zeros(s.shape, s.dtype)) for s in shapes]


def host(value):
    return np.asarray(value)


class RunningTotals:
    """Reads the sums of a ``_counted`` step: a pending value is ``(before, after, k, value)``, output ``k``'s
    sum (``value``, stacked over the steps of ``steps``) and the running totals before and after the step that
    added it (float64 arrays on the devices).  The steps of a run, each starting where the one before ended (an
    epoch's), add up to the last ``after[k]`` less the first ``before[k]``: two reads for a whole run, where reading
    each step's sum waits a round trip each on a GPU (a run's total that is not finite is its sums' own)."""
    @staticmethod
    def read(values):
        return jax.device_get([v[3] for v in values])

    @staticmethod
    def total(values):
        runs = []       # [before, after, k, the run's values]
        for value in values:
            before, after, k, _ = value
            if runs and runs[-1][1] is before and runs[-1][2] == k:
                runs[-1][1] = after
                runs[-1][3].append(value)
            else:
                runs.append([before, after, k, [value]])
        distinct = list({id(a): a for run in runs for a in run[:2]}.values())
        host = {id(a): h for a, h in zip(distinct, jax.device_get(distinct))}
        result = 0.0
        for before, after, k, run in runs:
            with np.errstate(invalid="ignore"):     # inf less inf: not finite, as the check below expects
                total = float(host[id(after)][k] - host[id(before)][k])
            if not np.isfinite(total):
                # a step's sum that was not finite stays in the totals of every later step: the run's own sums
                # tell whether it is one of them
                total = float(sum(np.sum(v, dtype=np.float64) for v in RunningTotals.read(run)))
            result += total
        return result


RUNNING_TOTALS = RunningTotals()


def _placement_error(what, program, where, view):
    """Placements on some devices run in the consistent view only (``placed.py``)."""
    return ConfigError(f"{what} of {program!r} was built under flow.scope.placement on devices {where}: expected "
                       f"the consistent view, which places it there; the {view} view keeps a whole replica of the "
                       f"model on every device, so build the model again without the placement, or use the "
                       f"consistent view")
