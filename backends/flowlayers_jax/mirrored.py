"""The mirrored view: one replica of the model per device, in one ``jax.jit`` of a ``shard_map`` over the
``replica`` axis.

Each replica runs its rows of the batch (``np.array_split``'s: the first ones get one more where the batch does not
divide) on its copy of the variables; the gradients of the replicas' loss sums, their element counts, the state
updates and the summed outputs are summed over the replicas (``psum``), the gradients divided by the global count:
N replicas compute the one-device mean gradient, also for uneven batches.  Then every replica applies the same rule
to its copy, so the copies stay identical.

``shard_map`` wants equal blocks: where the batch does not divide, each replica's rows are padded to the largest
part and a mask marks its real rows; the loss, the summed outputs and batch statistics leave the padding out, and
the host drops the padded rows of per-example outputs.
"""
import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import NamedSharding, PartitionSpec

from flowlayers.backend_common import micro_batch_bounds, replica_rows, step_by_step
from flowlayers.errors import EngineError

from .executable import BaseExecutable, host, loss_terms, probes, summed
from .lowering import Context, run_graph
from .rows import made_rows, rows_of, stacked_feeds, with_next_row

AXIS = "replica"


class MirroredExecutable(BaseExecutable):
    def __call__(self, feeds, handles, lr=0.0, step=1):
        p, n = self.program, self.runtime.num_replicas
        self._bind(handles)
        kinds = [x.node.attrs["kind"] for x in p.inputs]
        parts = [f if kind == "list" else replica_rows(f, n) for f, kind in zip(feeds, kinds)]
        rows = [len(part) if np.ndim(part) else 0 for part in parts[0]] if parts else [0] * n
        width = max(rows) if rows else 0
        even = all(r == width for r in rows)
        placed = [_padded(ps, width) for ps in parts]
        counts = None if even else np.asarray(rows, np.int32)
        update = self.updates_variables(step)
        fn = self._jit((even, update), lambda: self._step_of(even, update, len(placed)))
        outs = self._called(self._run(fn, placed, counts, *self._scalars(lr, step)), step + 1)
        blobs = list(p.outputs) + list(p.gradients)
        return [self._fetch(o, m, b, rows, width) for o, m, b in zip(outs, self._modes, blobs)]

    def _step_of(self, even, update, inputs):
        """What ``_jit`` compiles for ``inputs`` inputs, rows ``even`` over the replicas or not: (step, training,
        argument shardings)."""
        rt = self.runtime
        split = NamedSharding(rt.mesh, PartitionSpec(AXIS))      # each replica its rows
        rep = rt.replicated()
        return (self._counted(lambda *a: self._step(update, *a)), self.program.phase == "train",
                [[split] * inputs, None if even else split, rep, rt.replicated(1), rep])

    def steps(self, feeds, handles, lrs, first_step):
        """Several steps as one scanned step inside the ``shard_map``, a training array's rows gathered by each
        replica on its device; batches that do not divide over the replicas go step by step."""
        p, rt = self.program, self.runtime
        if not self._scans or rows_of(feeds) % rt.num_replicas or any(x.node.attrs["kind"] == "list" for x in p.inputs):
            return step_by_step(self, feeds, handles, lrs, first_step)
        self._bind(handles)
        split_steps = NamedSharding(rt.mesh, PartitionSpec(None, AXIS))
        sources, xs, uses, made, start = stacked_feeds(feeds, rt.stage)
        rows = rows_of(feeds)
        fn = self._jit(("steps", rows, tuple(s is None for s in sources), uses, made), lambda: (
            self._counted(lambda *a: self._scan_replicas(uses, made, rows, *a), steps=True), p.phase == "train",
            [[None if s is None else rt.replicated(s.ndim) for s in sources], rt.replicated(),
             [rt.replicated(1) if m else split_steps for m in made], rt.replicated(1), rt.replicated(1),
             rt.replicated()]))
        return self._run_steps(fn, sources, xs, start, rows, lrs, first_step)

    def _scan_replicas(self, uses, made, rows, trained, slots, updated, read, sources, first_row, xs, lrs, first):
        replicated, split = PartitionSpec(), PartitionSpec(None, AXIS)
        groups = (trained, slots, updated, read)
        in_specs = tuple([replicated] * len(g) for g in groups) + (
            [None if s is None else replicated for s in sources], [split] * len(xs), replicated, replicated)
        out_specs = ([replicated] * len(self.program.outputs),) + tuple([replicated] * len(g) for g in groups[:3])

        def one_step(t, s, u, read, feeds, lr, step):
            return self._replica(True, t, s, u, read, feeds, None, lr, step)

        body = jax.shard_map(lambda *a: self._scanned(one_step, uses, *a), mesh=self.runtime.mesh,
                             in_specs=in_specs, out_specs=out_specs)
        # rows made from the epoch's order here, then each replica's part of them passed in as fed rows are
        xs = made_rows(xs, made, first_row, lrs.shape[0], rows)
        outs, *carry = body(trained, slots, updated, read, sources, xs, lrs, first)
        return with_next_row(outs, made, first_row, lrs.shape[0], rows), *carry

    def _fetch(self, value, mode, blob, rows, width):
        """A step output -> host: a sum as is; per replica, its real rows (``list``: one array each; ``numpy``:
        concatenated; a scalar: the replicas' mean)."""
        if mode == "sum":
            return value        # pending on the devices until the host reads it: the next step goes ahead
        value = host(value)
        parts = []
        for i, r in enumerate(rows):
            part = value[i]
            if r < width and part.ndim and blob.shape and blob.shape[0] is None:
                if part.shape[0] != width:      # rows made from the padded ones and others: the padding is inside
                    raise EngineError(f"step {self.program.name!r}: output {blob.name!r} has {part.shape[0]} rows "
                                      f"per replica from {width} fed; expected one row per fed row where a batch of "
                                      f"{sum(rows)} rows does not divide over {len(rows)} replicas (padded to equal "
                                      f"parts); feed a batch that divides, or use the consistent view")
                part = part[:r]
            parts.append(part)
        if mode == "list":
            return parts
        if parts[0].ndim == 0:
            return np.mean(parts, dtype=parts[0].dtype) if len(parts) > 1 else parts[0]
        return np.concatenate(parts, axis=0) if len(parts) > 1 else parts[0]

    def _step(self, update, trained, slots, updated, read, feeds, counts, lr, step):
        replicated, split = PartitionSpec(), PartitionSpec(AXIS)
        groups = (trained, slots, updated, read)
        in_specs = tuple([replicated] * len(g) for g in groups) + ([split] * len(feeds), split if counts is not None
                                                                   else None, replicated, replicated)
        p = self.program
        modes = p.returned_modes
        out_specs = ([replicated if m == "sum" else split for m in modes],) + tuple([replicated] * len(g)
                                                                                  for g in groups[:3])
        body = jax.shard_map(lambda *a: self._replica(update, *a), mesh=self.runtime.mesh, in_specs=in_specs,
                             out_specs=out_specs)
        return body(trained, slots, updated, read, feeds, counts, lr, step)

    def _replica(self, update, trained, slots, updated, read, feeds, counts, lr, step):
        """One replica: its rows (``feeds``), its copies; the sums over replicas are the only collectives."""
        p = self.program
        replica = jax.lax.axis_index(AXIS)
        width = feeds[0].shape[0] if feeds and feeds[0].ndim else 0
        mask = None if counts is None else jnp.arange(width) < counts[0]
        values = {**dict(zip(self._read, read)), **dict(zip(self._updated, updated))}
        chunks = _micro_batches(feeds, mask, p.micro_batches if p.loss is not None else 1)

        def forward(trained_values, probes):
            vals = {**values, **dict(zip(self._trained, trained_values))}
            envs = []
            for k, (chunk, rows) in enumerate(chunks):
                ctx = Context(p.phase, step, self.seed, replica, rows)
                envs.append(run_graph(p, dict(zip(p.inputs, chunk)), vals, ctx,
                                      dict(zip(p.gradients, probes)) if k == 0 else None))
            outs = [sum(summed(p, b, env[b], rows) for env, (_, rows) in zip(envs, chunks)) if mode == "sum"
                    else envs[0][b] for b, mode in zip(p.outputs, p.output_modes)]
            news, seen = [envs[0][b] for _, b in p.updates], [envs[0][b] for b in p.gradients]
            if p.loss is None:
                return jnp.float32(0.0), (outs, news, jnp.float32(0.0), seen)
            terms = [loss_terms(p, env, rows) for env, (_, rows) in zip(envs, chunks)]
            local, count = sum(t for t, _ in terms), sum(c for _, c in terms)
            if p.state:
                # a loss scale: each example's loss weighs scale / the whole batch's count, as on one device, so
                # that float16 meets the same gradients (and overflows alike) in every view
                local = self._scaled(local, slots) / jax.lax.psum(jnp.asarray(count, jnp.float32), AXIS)
            return local, (outs, news, count, seen)

        if p.loss is None:
            _, (outs, news, count, _) = forward(trained, [])
            grads, watched = [], []
        else:
            # varying over the replicas: each replica's rows have their own gradient (the gradient of an input the
            # replicas share is summed over them by shard_map itself)
            zeros = probes(forward, trained, p, lambda z: jax.lax.pcast(z, AXIS, to="varying"))
            # ``_ordered``: the copies made varying too, so that shard_map leaves their gradients per replica
            copies = [jax.lax.pcast(t, AXIS, to="varying") for t in trained] if self._ordered else trained
            (_, (outs, news, count, _)), (grads, watched) = jax.value_and_grad(
                forward, argnums=(0, 1), has_aux=True)(copies, zeros)
        total = jax.lax.psum(jnp.asarray(count, jnp.float32), AXIS)     # whole numbers: exact in any order
        # the gradients of the copies are already the sums over the replicas: shard_map's transpose of a shared
        # input's use by every replica sums its cotangents (``_ordered``: summed here, in replica order)
        whole = total if not p.state else jnp.float32(1.0)      # (a loss scale's step divided by it already)
        grads = [g / whole.astype(g.dtype) for g in (self._sum(grads) if self._ordered else grads)]
        sums = iter(self._sum([o for o, mode in zip(outs, p.output_modes) if mode == "sum"]))
        if news:        # the state updates' mean over the replicas with rows
            active = (jnp.ones((), jnp.float32) if mask is None else jnp.any(mask).astype(jnp.float32))
            weight = jax.lax.psum(active, AXIS)
            news = [u / weight.astype(u.dtype) for u in
                    self._sum([jnp.where(active > 0, u, jnp.zeros_like(u)) for u in news])]
        outs = [next(sums) if mode == "sum" else o for o, mode in zip(outs, p.output_modes)]
        outs += [w / whole.astype(w.dtype) for w in self._unscaled(watched, slots)]
        modes = p.returned_modes
        return ([o if m == "sum" else o[None] for o, m in zip(outs, modes)],
                *self._apply(trained, grads, slots, news, updated, lr, step, update))

    @property
    def _ordered(self):
        """Whether sums over the replicas are gathered and added in replica order: on CPUs of several processes,
        where gloo's all-reduce adds in another order than XLA:CPU's within one process (which adds the replicas
        in order), so that the result is bit-identical to one process of as many devices.  It moves every
        replica's gradients to each device (a gather, not a reduction)."""
        return self.runtime.cluster is not None and self.runtime.platform == "cpu"

    def _sum(self, values):
        """``values`` (a list) summed over the replicas (``_ordered``: in replica order)."""
        if not self._ordered:
            return jax.lax.psum(values, AXIS)
        sums = []
        for v in values:
            parts = jax.lax.all_gather(v, AXIS, to="invarying")
            total = parts[0]
            for k in range(1, parts.shape[0]):
                total = total + parts[k]
            sums.append(total)
        return sums


def _padded(parts, width):
    """One replica's part per device -> one array of ``width`` rows each, stacked (padding: zeros)."""
    blocks = []
    for part in parts:
        part = np.asarray(part)
        if part.ndim and len(part) < width:
            part = np.concatenate([part, np.zeros((width - len(part),) + part.shape[1:], part.dtype)])
        blocks.append(part)
    return np.concatenate(blocks) if blocks[0].ndim else np.stack(blocks)


def _micro_batches(feeds, mask, n):
    """A replica's feeds -> ``n`` (feeds, mask) pairs, each a run of consecutive rows."""
    if n == 1 or not feeds:
        return [(list(feeds), mask)]
    bounds = micro_batch_bounds(feeds[0].shape[0], n)
    return [([f[a:b] for f in feeds], None if mask is None else mask[a:b]) for a, b in zip(bounds, bounds[1:])]
