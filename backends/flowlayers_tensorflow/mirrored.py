"""The mirrored view (and any view on one device): its runtime and executable.

One device: plain variables on that device.  N devices: ``MirroredStrategy`` variables (one copy per device);
the step runs each replica on its device's copies and agrees on gradients with one
collective all-reduce.  The same step code serves both.

Several processes (a Cluster): a ``MultiWorkerMirroredStrategy`` with one replica per device of every process
(``devices.join``); each process runs its own replicas, global replica ``p * local + d`` on its device ``d``, on
its rows of the global batch.  What the replicas agree on goes through one collective between the processes' first
devices (a collective group of all replicas, two per process, never completes on CPU: measured, DeadlineExceeded):
on CPUs every replica's values, summed in replica order as in one process; on GPUs each process's sum.  Collective group keys are the cluster's (the leader resolves
them), so every process makes the same runtimes, traces and host exchanges in the same order, as the contract has
it.  Outputs other than sums are gathered whole on the host, by a collective of zero-padded buffers.
"""
import itertools

import numpy as np
import tensorflow as tf

from flowlayers.backend_common import micro_batch_bounds, replica_rows
from flowlayers.errors import ConfigError, FlowLayersError

from . import devices
from .executable import BaseExecutable, squared
from .graph_options import step_options
from .lowering import LoweringContext, step_error
from .step import forward_backward, outputs
from .variables import SharedConstants, initial_value


class StrategyRuntime:

    def __init__(self, view, n, mesh=None, cluster=None, strategy=None):
        self.view, self.devices, self.cluster = view, devices.devices(n, cluster), cluster
        # the consistent view on one device keeps its mesh's axis names (each of size 1); replicas are an axis
        self.axes = list(mesh) if view == "consistent" and mesh else [("replica", n)]
        self.num_replicas = n
        self.first = cluster.index * len(self.devices) if cluster else 0    # this process's first global replica
        self.native_nchw = devices.is_gpu(self.devices[0])
        self._constants = SharedConstants()
        if strategy is None:
            strategy = _mirrored_strategy(self.devices) if n > 1 else tf.distribute.get_strategy()
        self.strategy = strategy
        if n > 1:
            self.group_key = next(_group_keys)
            # one per device: the collectives of a step are ordered through it (without, TF may run none)
            self._tokens = []
            for device in self.devices:
                with tf.device(device):
                    self._tokens.append(tf.Variable(0.0, trainable=False, name="collective_ordering"))

    def __repr__(self):
        return f"<tensorflow runtime view={self.view} devices={self.devices}>"

    def scope(self):
        return self.strategy.scope() if self.num_replicas > 1 else tf.device(self.devices[0])

    # Variables ----------------------------------------------------------
    def create_variable(self, spec, value=None):
        """A variable (one copy per replica) for VariableSpec ``spec``, holding ``value`` or drawn anew."""
        with self.scope():
            if value is not None:
                init = tf.constant(value)
            else:
                init = self._constants.get(spec, None, lambda: initial_value(spec))
            return tf.Variable(init, trainable=spec.trainable)

    def read(self, handle):
        return np.array(handle.numpy())

    def write(self, handle, value):
        handle.assign(value)

    def shard_shapes(self, handle):
        """Shape of the copy each device holds, read from the variable's per-device values (every process's copies
        are alike)."""
        shapes = [tuple(v.shape) for v in getattr(handle, "values", (handle,))]
        return shapes * (self.num_replicas // len(shapes))

    def holders(self, handle):
        """Indices of the devices holding the variable: every replica."""
        if self.cluster:
            return list(range(self.num_replicas))
        return list(range(len(getattr(handle, "values", (handle,)))))

    def barrier(self, name):
        """Return once every process reached ``barrier(name)``: a one-number all-reduce (at once without a
        cluster)."""
        if self.cluster:
            self._process_sum(np.zeros(1, np.float32))

    def gather(self, array):
        """Every process's host ``array`` (the same shape in each) joined along dim 0 in process order, in every
        process: a collective of zeros that each process fills at its place."""
        array = np.asarray(array)
        if not self.cluster:
            return array
        buffer = np.zeros((self.cluster.count,) + array.shape, array.dtype)
        buffer[self.cluster.index] = array
        return self._process_sum(buffer).reshape((-1,) + array.shape[1:])

    # Steps --------------------------------------------------------------
    def compile(self, program, plan, seed):
        return Executable(self, program, plan, seed)

    def place(self, feed, kind):
        """A host batch -> the step's input: one tensor per device, its rows of the batch (or its own array)."""
        if kind == "list":
            parts = feed
        else:
            parts = replica_rows(feed, self.num_replicas)
        if self.cluster and len(parts) != self.num_replicas:
            raise ConfigError(f"list input: expected one array per device of every process ({self.num_replicas}), "
                              f"received {len(parts)}")
        placed = []
        for device, part in zip(self.devices, parts[self.first:]):      # this process's replicas' rows
            with tf.device(device):
                placed.append(tf.constant(part))
        return placed

    def local_variables(self, handles, i):
        """``{path: the copy device i holds}`` for engine handles by path."""
        if self.num_replicas == 1:
            return handles
        return {path: self.strategy.experimental_local_results(h)[i] for path, h in handles.items()}

    def all_reduce(self, per_device):
        """Sum each position of ``per_device`` (one list of tensors per device) over the devices, inside a step.

        Logical CPU devices share the host's memory: each tensor is summed once, on the first device, and the
        others read the sum without a copy, where a ring collective copies and adds chunk by chunk.  Nothing is
        packed: copying tensors into and out of one vector cost more than it saved (both measured:
        bench/RESULTS_design.md).  GPUs use collectives, small tensors packed (``collective_all_reduce``).
        Several processes: on CPUs, summed in replica order as one process sums them (``_in_replica_order``); on
        GPUs summed on this process's first device (a collective group of this process's devices alone would need a
        key of its own per process), then over the processes (``_across_processes``).
        """
        if self.cluster and not self.native_nchw:
            return [self._in_replica_order(per_device)] * len(per_device)
        if self.native_nchw and not self.cluster:
            return self.collective_all_reduce(per_device)
        with tf.device(self.devices[0]):
            totals = [tf.add_n(list(tensors)) for tensors in zip(*per_device)]
        if self.cluster:    # then over the processes, between their first devices
            totals = self._across_processes(totals)
        return [totals] * len(per_device)

    def _in_replica_order(self, per_device):
        """Each position of ``per_device`` summed over every replica of every process, in replica order: the sums
        of one process of as many devices, bit for bit.  One collective of a (replicas, length) buffer of zeros that
        each process fills at its replicas' rows (adding zeros is exact) hands every process all rows, which are then
        summed in order.  It moves every replica's gradients, where ``_across_processes`` moves one sum per process:
        for CPU hosts, the stand-in for GPUs."""
        before, after = self.first, self.num_replicas - self.first - len(per_device)

        def in_order(rows):
            zeros = [tf.zeros([k, rows.shape[1]], rows.dtype) for k in (before, after)]
            every = self._process_collective(tf.concat([zeros[0], rows, zeros[1]], 0), [self._tokens[0].handle])
            return tf.add_n(tf.unstack(every))
        return self._rows_by_dtype(per_device, in_order)

    def _across_processes(self, tensors):
        """Each of ``tensors`` (on this process's first device) summed over the processes, inside a step: one
        collective per dtype."""
        return self._rows_by_dtype([tensors], lambda rows: self._process_collective(rows[0], [self._tokens[0].handle]))

    def _rows_by_dtype(self, per_device, reduce_rows):
        """On this process's first device, per dtype: each replica's tensors flattened into one row, the rows stacked
        and reduced by ``reduce_rows`` to one vector, which is split back into the tensors of ``per_device[0]``'s
        shapes."""
        out, by_dtype = list(per_device[0]), {}
        for j, t in enumerate(per_device[0]):
            by_dtype.setdefault(t.dtype, []).append(j)
        with tf.device(self.devices[0]):
            for js in by_dtype.values():
                rows = tf.stack([tf.concat([tf.reshape(tensors[j], [-1]) for j in js], 0) for tensors in per_device])
                shapes = [per_device[0][j].shape for j in js]
                for j, piece, shape in zip(js, tf.split(reduce_rows(rows), [sh.num_elements() for sh in shapes]),
                                           shapes):
                    out[j] = tf.reshape(piece, shape)
        return out

    def _process_collective(self, flat, token=()):
        """``flat`` summed over the first devices of the processes (one collective group, the same key in all)."""
        return tf.raw_ops.CollectiveReduceV2(input=flat, group_size=self.cluster.count, group_key=self.group_key,
                                             instance_key=next(_instance_keys), ordering_token=list(token),
                                             merge_op="Add", final_op="Id")

    def _process_sum(self, array):
        """A host array summed over the processes (every process calls this in the same order)."""
        array = np.asarray(array)
        cast = array.dtype == np.bool_
        with tf.device(self.devices[0]):
            total = self._process_collective(tf.constant(array.astype(np.int32) if cast else array)).numpy()
        return total.astype(np.bool_) if cast else total

    def _gathered(self, parts):
        """Every replica's part, in replica order, from this process's ``parts`` (whole in every process): their
        shapes first, then their values, each in a buffer of zeros that every process fills at its parts' place."""
        rank, n, mine = parts[0].ndim, self.num_replicas, slice(self.first, self.first + len(parts))
        shapes = np.zeros((n, rank), np.int64)
        shapes[mine] = [p.shape for p in parts]
        shapes = self._process_sum(shapes)
        sizes = [int(np.prod(s)) for s in shapes]
        offsets = np.concatenate([[0], np.cumsum(sizes)])
        flat = np.zeros(offsets[-1], parts[0].dtype)
        flat[offsets[mine.start]:offsets[mine.stop]] = np.concatenate([p.ravel() for p in parts])
        flat = self._process_sum(flat)
        return [flat[offsets[i]:offsets[i + 1]].reshape(shapes[i]) for i in range(n)]

    def collective_all_reduce(self, per_device):
        """``all_reduce`` by collectives: one per tensor of ``PACK_BYTES`` or more, one per dtype for the rest."""
        return self._packed(per_device, self._collective)

    def _collective(self, flats):
        instance, out = next(_instance_keys), []
        for device, flat, token in zip(self.devices, flats, self._tokens):
            with tf.device(device):
                out.append(tf.raw_ops.CollectiveReduceV2(
                    input=flat, group_size=self.num_replicas, group_key=self.group_key, instance_key=instance,
                    ordering_token=[token.handle], merge_op="Add", final_op="Id"))
        return out

    def _packed(self, per_device, reduce_flat):
        """Each dtype's small tensors flattened into one vector per device and reduced together by ``reduce_flat``
        (a reduction per tensor costs a rendezvous or a cross-device edge each: hundreds for a deep model), then
        split back.  A tensor of ``PACK_BYTES`` or more is reduced alone: packing it would copy it in and out for
        nothing, and alone its reduction starts as soon as the replicas have it, while the backward pass goes on."""
        out = [list(tensors) for tensors in per_device]
        packed = {}
        for j, t in enumerate(per_device[0]):
            if t.shape.num_elements() * t.dtype.size >= PACK_BYTES:
                for i, reduced in enumerate(reduce_flat([tensors[j] for tensors in per_device])):
                    out[i][j] = reduced
            else:
                packed.setdefault(t.dtype, []).append(j)
        for js in packed.values():
            shapes = [per_device[0][j].shape for j in js]
            flats = []
            for i, device in enumerate(self.devices):
                with tf.device(device):
                    flats.append(tf.concat([tf.reshape(per_device[i][j], [-1]) for j in js], 0))
            for i, (device, flat) in enumerate(zip(self.devices, reduce_flat(flats))):
                with tf.device(device):
                    pieces = tf.split(flat, [s.num_elements() for s in shapes])
                    for j, piece, shape in zip(js, pieces, shapes):
                        out[i][j] = tf.reshape(piece, shape)
        return out

    def fetch(self, value, mode):
        """A step output (one tensor per device) -> host numpy, per the Program's output mode."""
        if mode == "sum":
            return value[0].numpy()     # the same on every device
        parts = [t.numpy() for t in value]
        if self.cluster:
            parts = self._gathered(parts)
        if mode == "list":
            return parts
        if parts[0].ndim == 0:
            return np.mean(parts, dtype=parts[0].dtype) if len(parts) > 1 else parts[0]
        return np.concatenate(parts, axis=0) if len(parts) > 1 else parts[0]

    def wrap_error(self, program, error, graphs=()):
        return step_error(program, error, graphs)


PACK_BYTES = 256 * 1024    # tensors this large are all-reduced alone, smaller ones packed together
_strategies_made = [0]
# group and instance keys of the steps' own collectives: apart from MirroredStrategy's (counted from 1 + base)
_group_keys = itertools.count(2_000_000_000, -1)
_instance_keys = itertools.count(1_000_000_000)


def _mirrored_strategy(devices):
    """A MirroredStrategy whose collective group keys cannot collide with another's in this process.

    Each MirroredStrategy numbers its collective groups from ``1 + _collective_key_base`` (0 by
    default), so a 2-device and a 4-device strategy in one process would both use group 1 and
    abort ("joining a group with size 4, but that group has size 2").
    """
    _strategies_made[0] += 1
    base = 1_000_000 * _strategies_made[0]
    cls = type("MirroredStrategy", (tf.distribute.MirroredStrategy,), {"_collective_key_base": base})
    return cls(devices)


class Executable(BaseExecutable):
    """One compiled Program for a strategy runtime (one device, or the mirrored view on N): one tf.function per step.
    
    Train step: on each device, that replica's forward and backward (the loss summed locally, gradients of that
    sum) — one traced function, called once per device with that device's copies of the variables as arguments,
    so it is traced once whatever N.  Then one all-reduce (SUM, see ``StrategyRuntime.all_reduce``) of everything
    the replicas must agree on: element counts, gradients, layer state updates and summed outputs; the gradients
    are divided by the global element count, so N replicas compute the one-device mean gradient, even for uneven
    last batches.  Then the optimizer rule on every device's copy (a second shared traced function).
    """

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
                                self.updates_variables(step))
        except FlowLayersError:
            raise
        except tf.errors.OpError as e:
            raise self.runtime.wrap_error(self.program, e) from None
        modes = self.program.returned_modes
        return [self.runtime.fetch(o, m) for o, m in zip(outs, modes)]

    # The traced step ----------------------------------------------------
    def _step(self, feeds, lr, step, active, update=True):
        """``feeds``: per input, one tensor per device; the first ``active`` devices have rows (a batch smaller
        than the device count leaves the others none).  Returns per output one tensor per device."""
        p, rt = self.program, self.runtime
        n, modes = rt.num_replicas, p.output_modes
        copies = [rt.local_variables(self._handles, i) for i in range(len(rt.devices))]
        replicas = []
        for i, device in enumerate(rt.devices):
            with tf.device(device):
                # global replica rt.first + i.  Where every replica of this process lacks rows, its first runs on
                # none, only for the shapes of what an idle replica contributes (its own values, NaN means of
                # nothing among them, are dropped)
                if rt.first + i < active or not replicas:
                    replicas.append(self._local_fn([f[i] for f in feeds], [copies[i][k] for k in self._paths],
                                                   step, tf.constant(rt.first + i)))
                    if rt.first + i >= active:
                        replicas[-1] = _idle(replicas[-1], modes)
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


def _micro_batches(feeds, n):
    """A replica's feeds -> ``n`` lists of them, each a run of consecutive rows (sizes differ by one at most; a
    replica with fewer rows than ``n`` runs some empty ones)."""
    if n == 1 or not feeds:
        return [list(feeds)]
    bounds = micro_batch_bounds(tf.shape(feeds[0])[0], n)
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
