"""The mirrored view's executable (and any view's on one device), run on a ``StrategyRuntime`` (``runtime.py``).

One device: plain variables on that device.  N devices: ``MirroredStrategy`` variables (one copy per device);
the step runs each replica on its device's copies and agrees on gradients with one
collective all-reduce.  The same step code serves both.

Several processes (a Cluster): a ``MultiWorkerMirroredStrategy`` with one replica per device of every process
(``devices.join``); each process runs its own replicas, global replica ``p * local + d`` on its device ``d``, on
its rows of the global batch; what the replicas agree on goes through ``collectives.py``.  Collective group keys are
the cluster's (the leader resolves them), so every process makes the same runtimes, traces and host exchanges in the
same order, as the contract has it.  Outputs other than sums are gathered whole on the host, by a collective of
zero-padded buffers.
"""
import functools

import tensorflow as tf

from flowlayers.backend_common import micro_batch_bounds
from flowlayers.errors import FlowLayersError

from .executable import BaseExecutable, squared
from .graph_options import step_options
from .lowering import LoweringContext
from .step import forward_backward, outputs


class MirroredExecutable(BaseExecutable):
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
        # a partial, not the bound method: TF counts traces per code object, so every executable's first trace
        # would count as retracing of one function and warn; this way only this step's own retraces count
        self._fn = tf.function(functools.partial(self._step), reduce_retracing=True, autograph=False)
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
        self._paths = [v.path for v in p.variables] + self._state_paths     # the loss scale read by the forward

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
        handles = dict(zip(self._paths, variables))
        envs, size, grads, watched = forward_backward(p, chunks, handles, [ctx] * len(chunks),
                                                      loss_scale=self.loss_scale(handles),
                                                      replicas=self.runtime.num_replicas)
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

