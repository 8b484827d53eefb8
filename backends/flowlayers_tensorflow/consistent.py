"""The consistent view's executable on TF DTensor (its runtime: ``runtime.py``; its lowering context, which lays
each Blob out as planned: ``lowering.py``): one logical tensor per Blob, laid out over a mesh by SBP.

Variables are DVariables with the layouts their rules give (replicated by
default).  The planner's nd-SBP for every Blob becomes a ``dtensor.relayout``
so DTensor computes what was planned; partial sums are left to DTensor's SPMD
expansion (DTensor layouts have no public partial-sum).

A train step is TWO tf.functions.  The gradients are computed by DTensor,
laid out as their variables; then every device applies the optimizer rule to
the blocks it holds, with TF's kernels for whole rules, outside DTensor: the
rules are elementwise, so a block updated by the same block of its gradient is
what the whole would be, and DTensor would decompose those kernels into four to
eight elementwise ops on every device (measured: bench/RESULTS_design.md).
Fused, with DTensor's all-reduce combiner on (its default), most DVariables are
left silently un-updated in TF 2.21 (``../shared/notes/dtensor_fused_update_bug.py``);
with the combiner off (``DTENSOR_ENABLE_COMBINE_ALL_REDUCES_OPTIMIZATION=0``) the
fused step is exact, but it fails to compile under some layouts, so the step
stays split (tests/parallel/test_split_step.py fuses it to show both).

Several processes (a Cluster): DTensor multi-client (``devices.join``), the mesh made by
``dtensor.create_distributed_mesh``, each process holding its devices' components only.  A host value handed in
is packed from this process's blocks (``to_mesh``); a value handed back is relaid out replicated and read from a
local component (``read``; outputs are replicated in the step already).  The update step is per device already:
each process updates the blocks it holds.
"""
import contextlib
import functools
import os

import numpy as np
import tensorflow as tf
from tensorflow.experimental import dtensor

from flowlayers.backend_common import micro_batches
from flowlayers.errors import ConfigError, FlowLayersError

from . import executable
from .collectives import PACK_BYTES
from .executable import BaseExecutable
from .graph_options import step_options
from .lowering import DTensorContext, relayout
from .step import forward_backward, outputs, summed

GROUP_SIZE = "DTENSOR_ALLREDUCE_COMBINE_OPTIMIZATION_GROUP_SIZE"   # read each time DTensor compiles a function




class ConsistentExecutable(BaseExecutable):
    def __init__(self, runtime, program, plan, seed):
        super().__init__(runtime, program, plan, seed)
        if runtime.cluster and self._clips_by_norm:
            # the norm sums squares of blocks that other processes may hold alone (``_update``)
            raise ConfigError(f"{program.name!r}: expected an optimizer without clipnorm/global_clipnorm in the "
                              f"consistent view over {runtime.cluster.count} processes, received one that clips by "
                              f"norm; the tensorflow backend does not clip by norm across processes: use clipvalue, "
                              f"the mirrored view, or one process")
        # what the update writes from the gradient step's outputs, in their order: by gradient, then by new value
        self._written = list(program.trainable) + [var for var, _ in program.updates]

    def _check_placements(self):
        """(The runtime hands steps that would hang as one function to ``staged.py``.)"""

    def _retrace(self):
        self._fns, self._relayouts, self._updates, self._blocks = {}, {}, {}, None
        self._group_size = self._all_reduce_group_size()
        self._apply_fn = tf.function(self._apply, autograph=False)
        # one update function per kind of step: applying the rule, or (gradient accumulation) only accumulating
        self._update_fns = {flag: tf.function(functools.partial(self._update, update=flag), autograph=False)
                            for flag in (True, False)}

    def _all_reduce_group_size(self):
        """How DTensor should group the step's all-reduces: all in one ("0") where its gradients and state updates
        average under ``PACK_BYTES``, each apart ("1") otherwise; None to leave DTensor's setting.

        Combined (DTensor's default), one collective replaces hundreds, but it starts only once the last gradient
        exists and copies each into and out of one buffer: many small gradients gain from it, large ones lose, each
        all-reduce then starting while the backward pass goes on (measured on logical CPU devices:
        bench/RESULTS_design.md).  (A group size in the environment, the user's, stands: ``all_reduce_grouping``.)"""
        if not self.runtime.groups_all_reduces:
            return None
        reduced = [self._handles[v.path] for v in self._written]
        if not reduced:
            return None
        size = sum(h.shape.num_elements() * h.dtype.size for h in reduced) / len(reduced)
        return "0" if size < PACK_BYTES else "1"

    def _functions(self, sizes):
        """(plans, forward-or-grads fn) for the fed micro-batch sizes (one size: no micro-batches); a plan depends
        on whether its size splits."""
        if sizes not in self._fns:
            plans = [self.plan(size) for size in sizes]
            jit = self.program.jit_compile or None
            # partials, not lambdas: TF counts traces per code object and warns of "frequent retracing"
            self._fns[sizes] = (plans, tf.function(functools.partial(self._forward, plans), jit_compile=jit,
                                                   autograph=False))
        return self._fns[sizes]

    def _in_variable_layouts(self, batch, grads, updates):
        """Gradients and state updates laid out as their variables, so that each device's block of one matches its
        block of the other.  DTensor picks the layouts of a function's outputs, so where one differs is known once
        the gradient step has run; only those go through a DTensor relayout function (a relayout that moves nothing
        still costs tracing and SPMD expansion: 400 in a 200-layer MLP)."""
        values = list(grads) + list(updates)
        if batch not in self._relayouts:
            targets = [self._handles[v.path].layout for v in self._written]
            layouts = [dtensor.fetch_layout(t) for t in values]
            moves = [i for i, t in enumerate(layouts) if t.to_string() != targets[i].to_string()]
            self._relayouts[batch] = moves and (moves, tf.function(
                functools.partial(_relayout, [targets[i] for i in moves], [layouts[i] for i in moves]),
                autograph=False))
        if self._relayouts[batch]:
            moves, relayout = self._relayouts[batch]
            for i, moved in zip(moves, relayout([values[i] for i in moves])):
                values[i] = moved
        return values[:len(grads)], values[len(grads):]

    def __call__(self, feeds, handles, lr=0.0, step=1):
        p, rt = self.program, self.runtime
        self._bind(handles)
        chunks = micro_batches(feeds, p.micro_batches if p.loss is not None else 1)
        batch = tuple(len(c[0]) if c and np.ndim(c[0]) else None for c in chunks)     # the micro-batches' sizes
        plans, forward = self._functions(batch)
        placed = [[rt.place(f, plan.sbp[x]) for f, x in zip(chunk, p.inputs)] for chunk, plan in zip(chunks, plans)]
        # float64: DTensor folds small replicated int32/int64/float32 inputs into the program as constants, so a
        # new step counter would compile the step again; float64 inputs it leaves alone.  A plain scalar: DTensor
        # broadcasts it to the default mesh itself, at half the cost of copy_to_mesh
        step_t = tf.constant(step, tf.float64)
        try:
            with step_options(cpu=not rt.native_nchw):
                with dtensor.default_mesh(rt.mesh), all_reduce_grouping(self._group_size):
                    outs, grads, updates = forward(placed, step_t)
                    grads, updates = self._in_variable_layouts(batch, grads, updates)
                results, grads, updates = self._on_host(outs, grads, updates)
                if grads or updates:
                    self._run_update(batch, grads, updates, lr, step)
            return results
        except FlowLayersError:
            raise
        except tf.errors.OpError as e:
            raise rt.wrap_error(p, e, self._traced_graphs()) from None

    def _on_host(self, outs, grads, updates):
        """The outputs read on the host, and each device's blocks of the gradients and state updates.

        DTensor reports an error of the step when its results are used: on the host, a result may carry only
        another device's cancellation, and the devices refuse every later op until a DTensor op meets the error
        (the process would be stuck).  So on an error one result goes through an op, which raises the error the
        devices met first and clears them."""
        try:
            modes = self.program.returned_modes
            return ([self._fetch(o, m) for o, m in zip(outs, modes)],
                    [dtensor.unpack(g) for g in grads], [dtensor.unpack(u) for u in updates])
        except tf.errors.OpError:
            with dtensor.default_mesh(self.runtime.mesh):
                tf.identity((list(outs) + list(grads) + list(updates))[0])
            raise

    def _traced_graphs(self):
        """The graphs of the step functions traced so far: DTensor's errors name an op type, found in them."""
        fns = [f for _, *traced in self._fns.values() for f in traced]
        fns += [relayout for _, relayout in filter(None, self._relayouts.values())] + [self._apply_fn,
                                                                                       *self._update_fns.values()]
        return [c.graph for f in fns for c in f._list_all_concrete_functions()]

    def _fetch(self, value, mode):
        parts = [t.numpy() for t in dtensor.unpack(value)]
        return parts if mode == "list" else parts[0]

    def _forward(self, plans, chunks, step):
        """The step's forward (and backward) pass over its micro-batches (``chunks``, one feed list each, with
        ``plans``): one graph of independent chains that meet only in the summed loss, so the engine runs
        whichever op is ready, and stages placed on different devices work on different micro-batches at once."""
        p, rt = self.program, self.runtime
        contexts = [DTensorContext(p.phase, step, self.seed, rt, plan) for plan in plans]
        where_loss = rt.mesh_for(p.loss.node.placement) if p.loss is not None else rt.mesh
        envs, _, grads, watched = forward_backward(p, chunks, self._handles, contexts, mean=True,
                                                   loss_scope=lambda: dtensor.default_mesh(where_loss),
                                                   loss_scale=self.loss_scale(self._handles))
        grads, updates = [_unfolded(g) for g in grads], [_unfolded(envs[0][b]) for _, b in p.updates]
        # the sum's axes are made on the mesh of what it sums; the host reads every output replicated
        outs = outputs(p, envs, lambda blob: dtensor.default_mesh(rt.mesh_for(blob.node.placement)))
        outs = [dtensor.relayout(value, rt.replicated(value.shape.rank, rt.mesh_for(blob.node.placement)))
                for value, blob in zip(outs, p.outputs)]
        outs += [dtensor.relayout(g, rt.replicated(g.shape.rank, rt.mesh_for(b.node.placement)))
                 for g, b in zip(watched, p.gradients)]
        return outs, grads, updates

    def _run_update(self, batch, grads, updates, lr, step):
        """Calls the update traced for ``batch`` with its inputs flat (``_call_flat``, how TF itself calls a traced
        function): for hundreds of tensors (a 200-layer MLP's gradients per device), tf.function's handling of
        nested arguments costs thirty times the flat call (bench/RESULTS_design.md)."""
        args = (grads, updates, tf.constant(lr, tf.float32), tf.constant(step, tf.int64))
        update = self.updates_variables(step)
        if (batch, update) not in self._updates:
            if self._blocks is None:
                self._blocks = self.runtime.device_blocks(self._handles)
                holders = {v.path: self.runtime.holders(self._handles[v.path]) for v in self._written}
                self._position = {path: {i: j for j, i in enumerate(devices)} for path, devices in holders.items()}
                # per trainable variable, (position, device index) of the blocks that hold its gradient once
                self._tiling = [[(j, holders[v.path][j]) for j in self.runtime.tiling_blocks(self._handles[v.path])]
                                for v in self.program.trainable]
            self._updates[batch, update] = self._update_fns[update].get_concrete_function(*args)
        function = self._updates[batch, update]
        function._call_flat(tf.nest.flatten(args), function.captured_inputs)

    def _update(self, grads, updates, lr, step, update=True):
        """The optimizer step, outside DTensor: on every device, the rule on the blocks it holds, by the same blocks
        of the gradients (``grads``, ``updates``: per variable, the blocks of its gradient or new value).  Clipping
        by norm takes each whole gradient's sum of squares, from blocks that hold it once, each on its device."""
        norms = None
        if self._clips_by_norm:
            squared = []
            for blocks, tiling in zip(grads, self._tiling):
                parts = []
                for j, device in tiling:
                    with tf.device(self.runtime.devices[device]):
                        parts.append(executable.squared(blocks[j]))
                squared.append(summed(parts))
            norms = self._norms(squared)
        finite = None
        if self.program.optimizer is not None and self.program.optimizer.checks_finite and grads:
            # whether every gradient is finite, from every block on its device (a block held twice checks alike)
            flags = []
            for blocks, devices in zip(grads, (self.runtime.holders(self._handles[v.path])
                                               for v in self.program.trainable)):
                for block, device in zip(blocks, devices):
                    with tf.device(self.runtime.devices[device]):
                        flags.append(executable.all_finite([block]))
            finite = tf.reduce_all(tf.stack(flags))
        for i, device in enumerate(self.runtime.devices):
            held = [self._position[v.path].get(i) for v in self._written]      # its block of each, or None
            pick = [None if j is None else blocks[j] for j, blocks in zip(held, list(grads) + list(updates))]
            with tf.device(device):
                self._apply_copies(self._blocks[i], pick[:len(grads)], pick[len(grads):], lr, step, update, norms,
                                   finite)


@contextlib.contextmanager
def all_reduce_grouping(group_size):
    """DTensor's all-reduce group size set to ``group_size`` while DTensor may compile a step function (it reads the
    setting each time it compiles one); then unset again.  None, or a group size the user set, is left alone."""
    if group_size is None or GROUP_SIZE in os.environ:
        yield
        return
    os.environ[GROUP_SIZE] = group_size
    try:
        yield
    finally:
        del os.environ[GROUP_SIZE]



def _relayout(layouts, sources, values):
    """``values`` (laid out as ``sources``) laid out as ``layouts`` (``lowering.relayout``: never by DTensor's
    all-to-all where it is wrong)."""
    return [relayout(v, layout, source) for v, layout, source in zip(values, layouts, sources)]



def _unfolded(t):
    """A tensor of under 20 float32s as float64, passed so out of the gradient step: DTensor folds small replicated
    int32/int64/float32 inputs into a program as constants, and would compile a relayout function taking it again
    when one changes (a bias gradient: at the second step)."""
    return tf.cast(t, tf.float64) if t.dtype == tf.float32 and t.shape.num_elements() < 20 else t

