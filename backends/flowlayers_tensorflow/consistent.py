"""The consistent view on TF DTensor: one logical tensor per Blob, laid out over a mesh by SBP.

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
import itertools
import os

import numpy as np
import tensorflow as tf
from tensorflow.experimental import dtensor
from tensorflow.python.ops.resource_variable_ops import BaseResourceVariable

from flowlayers.contract import micro_batches
from flowlayers.errors import ConfigError, FlowLayersError
from flowlayers.sbp import Split, broadcast, partial_sum

from . import devices, executable, placements
from .executable import BaseExecutable
from .graph_options import step_options
from .lowering import LoweringContext, step_error
from .mirrored import PACK_BYTES
from .step import forward_backward, outputs, summed
from .variables import SharedConstants, draw

GROUP_SIZE = "DTENSOR_ALLREDUCE_COMBINE_OPTIMIZATION_GROUP_SIZE"   # read each time DTensor compiles a function
_block_ids = itertools.count()


def supports(op_name, sig):
    """Whether DTensor (TF 2.21) can expand ``sig``: the planner offers only those.

    Its convolution wants a replicated filter and unsplit input channels ("Filter for convolution must have
    fully replicated layout", "Conv input's channel dimension must be replicated"); its pooling only a
    replicated or batch-split input ("Only replicated or batch parallel layout is supported").  A kernel
    split by a layout rule is then gathered before the convolution: stored split, computed whole.
    """
    if op_name in ("conv2d", "conv2d_transpose", "conv3d", "depthwise_conv2d"):
        return sig.inputs[1] == broadcast and sig.inputs[0] in (Split(0), broadcast, partial_sum)
    if op_name in ("max_pool2d", "avg_pool2d", "max_pool3d", "avg_pool3d"):
        return sig.inputs[0] in (Split(0), broadcast)
    return True


class ConsistentRuntime:
    view = "consistent"

    def __init__(self, n, mesh_axes, cluster=None):
        self.devices = devices.devices(n, cluster)     # this process's
        self.cluster = cluster
        self.axes = list(mesh_axes)
        self.num_replicas = n
        self.native_nchw = devices.is_gpu(self.devices[0])
        kind = "GPU" if self.native_nchw else "CPU"
        # on CPU meshes a step's all-reduces are grouped as its gradients' sizes call for; GPU meshes keep DTensor's
        # default (measured on CPU only)
        self.groups_all_reduces = kind == "CPU"
        if cluster:     # process p's devices are global devices p * local .. (p + 1) * local - 1
            self.mesh = dtensor.create_distributed_mesh(self.axes, local_devices=[d.replace("/device:", "")
                                                                                  for d in self.devices],
                                                        device_type=kind)
        else:
            self.mesh = dtensor.create_mesh(self.axes, devices=[d.replace("/device:", "") for d in self.devices],
                                            device_type=kind)
        self._draws, self._constants, self._meshes = {}, SharedConstants(), {None: self.mesh}
        self._gather_mesh = None        # several processes: a one-axis mesh of all devices (``gather``)

    def __repr__(self):
        return f"<tensorflow runtime view=consistent mesh={dict(self.axes)}>"

    # Layouts ------------------------------------------------------------
    def mesh_for(self, placement):
        """The mesh of a placement: all devices (None), or a one-axis mesh over some of them, each holding whole
        tensors (``flow.scope.placement("gpu", "0:1")``).  DTensor moves tensors between meshes with
        ``copy_to_mesh`` inside a step function, gradients included."""
        if placement not in self._meshes:
            if self.cluster:
                raise ConfigError(f"flow.scope.placement on devices {list(placement)}: expected no placement on some "
                                  f"devices in a job of {self.cluster.count} processes, received one; the tensorflow "
                                  f"backend places ops on all devices there (run the placement in one process)")
            (axis, _), = self.axes
            self._meshes[placement] = dtensor.create_mesh(
                [(axis, len(placement))], devices=[self.devices[d].replace("/device:", "") for d in placement],
                device_type=self.mesh.device_type())
        return self._meshes[placement]

    def layout(self, nd_sbp, rank, mesh=None):
        """nd-SBP -> DTensor Layout; P has no layout and is read as replicated."""
        spec = [dtensor.UNSHARDED] * rank
        for (axis, _), sbp in zip(self.axes, nd_sbp):
            if isinstance(sbp, Split):
                spec[sbp.axis] = axis
        return dtensor.Layout(spec, mesh or self.mesh)

    def replicated(self, rank, mesh=None):
        return dtensor.Layout.replicated(mesh or self.mesh, rank)

    def to_mesh(self, value, layout):
        """A host array -> a DTensor in ``layout``: each device receives its block only, never the whole array."""
        value = np.asarray(value)
        return dtensor.pack([tf.constant(value[block]) for block in self._blocks(layout, value.shape)], layout)

    def _blocks(self, layout, shape, local=True):
        """Per device of the layout's mesh (in its order), the block of a tensor of ``shape`` it holds: this
        process's devices (``local``), or all."""
        mesh = layout.mesh
        blocks = []
        coordinates = _coordinates(mesh)
        for coords in [coordinates[i] for i in mesh.local_device_ids()] if local else coordinates:
            block = []
            for dim, axis in enumerate(layout.sharding_specs):
                if axis in coords:
                    size = shape[dim] // mesh.dim_size(axis)
                    block.append(slice(coords[axis] * size, (coords[axis] + 1) * size))
                else:
                    block.append(slice(None))
            blocks.append(tuple(block))
        return blocks

    # Variables ----------------------------------------------------------
    def variable_layout(self, spec):
        """The DTensor layout of VariableSpec ``spec``: its nd-SBP, on the mesh of its placement."""
        return self.layout(spec.nd_sbp, len(spec.shape), self.mesh_for(spec.devices))

    def create_variable(self, spec, value=None):
        """A DVariable for VariableSpec ``spec``, holding ``value`` or drawn anew, in its layout."""
        layout = self.variable_layout(spec)
        if value is not None:
            return dtensor.DVariable(self.to_mesh(value, layout), trainable=spec.trainable)
        drawn = self._constants.get(spec, layout.to_string(), lambda: self._drawn(spec, layout))
        return dtensor.DVariable(drawn, trainable=spec.trainable)

    def _drawn(self, spec, layout):
        """``var``'s initial value, drawn on the devices, replicated (the same numbers as one device), then sliced
        locally: no host copy.  The seed goes in as two float64 scalars, which DTensor puts on the default mesh
        itself, faster than a ``copy_to_mesh``."""
        replicated = self.replicated(len(spec.shape), layout.mesh)
        with dtensor.default_mesh(layout.mesh):
            drawn = dtensor.call_with_layout(self._draw(spec), replicated,
                                             *[tf.constant(s, tf.float64) for s in spec.seed])
        if layout != replicated:        # (an eager relayout costs even when it moves nothing: 800 in a deep MLP)
            drawn = dtensor.relayout(drawn, layout)
        return drawn

    def _draw(self, spec):
        """One traced draw per initializer, shape and dtype, the seed its input (not one traced and compiled per
        variable: bench/RESULTS_design.md); float64, as DTensor folds small int inputs into the program as
        constants."""
        sampler, shape, dtype, path = spec.sampler, spec.shape, spec.dtype, spec.path
        key = (repr(sampler), shape, dtype)
        if key not in self._draws:
            # a partial, not a lambda: TF warns of "frequent retracing" by code object, and every key traces once
            self._draws[key] = tf.function(functools.partial(_draw_from_pair, sampler, shape, dtype, path),
                                           autograph=False)
        return self._draws[key]

    def read(self, handle):
        """The full value, assembled on the host from each device's shard (no device holds it whole)."""
        value = tf.convert_to_tensor(handle)
        if self.cluster:    # other processes hold blocks too: whole on every device, read from one
            with dtensor.default_mesh(self.mesh):
                return dtensor.unpack(dtensor.relayout(value, self.replicated(value.shape.rank)))[0].numpy()
        full = np.empty(value.shape, value.dtype.as_numpy_dtype)
        for block, shard in zip(self._blocks(dtensor.fetch_layout(value), full.shape), dtensor.unpack(value)):
            full[block] = shard.numpy()
        return full

    def write(self, handle, value):
        handle.assign(self.to_mesh(value.astype(handle.dtype.as_numpy_dtype), dtensor.fetch_layout(handle)))

    def shard_shapes(self, handle):
        if self.cluster:    # every device's, this process's and the others': from the layout
            shape = handle.shape
            return [tuple(len(range(*b.indices(n))) for b, n in zip(block, shape))
                    for block in self._blocks(handle.layout, shape, local=False)]
        return [tuple(t.shape) for t in dtensor.unpack(tf.convert_to_tensor(handle))]

    def holders(self, handle):
        """Indices of the devices holding the variable: its mesh's."""
        if self.cluster:    # (no placements on some devices here: every device)
            return list(range(self.num_replicas))
        return self.device_indices(handle.layout.mesh)

    def barrier(self, name):
        """Return once every process reached ``barrier(name)`` (DTensor's: an all-reduce over the mesh, then the
        coordination service's barrier); at once without a cluster."""
        if self.cluster:
            dtensor.barrier(self.mesh, name)

    def gather(self, array):
        """Every process's host ``array`` (the same shape in each) joined along dim 0 in process order, in every
        process: each device holds its process's array as one row of a tensor split over a one-axis mesh of all
        devices, relaid out replicated (DTensor's all-gather); each process's first device's row is kept."""
        array = np.asarray(array)
        if not self.cluster:
            return array
        if self._gather_mesh is None:
            self._gather_mesh = dtensor.create_distributed_mesh(
                [("flowlayers_all", self.num_replicas)], device_type=self.mesh.device_type(),
                local_devices=[d.replace("/device:", "") for d in self.devices])
        mesh = self._gather_mesh
        rows = dtensor.pack([tf.constant(array[None])] * len(self.devices),
                            dtensor.Layout.batch_sharded(mesh, "flowlayers_all", array.ndim + 1))
        with dtensor.default_mesh(mesh):
            whole = dtensor.unpack(dtensor.relayout(rows, dtensor.Layout.replicated(mesh, array.ndim + 1)))[0].numpy()
        return whole[::len(self.devices)].reshape((-1,) + array.shape[1:])

    def device_blocks(self, handles):
        """Per device of the mesh, ``{path: the block it holds}`` for DVariables by path: each block a TF variable
        on that device sharing the DVariable's storage, so writing it writes the DVariable.  A variable of a
        placement on some devices has blocks on those only."""
        per_device = [{} for _ in self.devices]
        for path, handle in handles.items():
            layout = handle.layout
            shape = [n // layout.mesh.dim_size(axis) if axis in layout.mesh.dim_names else n
                     for n, axis in zip(handle.shape, layout.sharding_specs)]
            for i, block in zip(self.device_indices(layout.mesh), dtensor.unpack(handle.handle)):
                per_device[i][path] = BaseResourceVariable(trainable=False, shape=shape, dtype=handle.dtype, handle=block,
                                                    unique_id=f"flowlayers_block_{next(_block_ids)}",
                                                    in_graph_mode=False)
        return per_device

    def tiling_blocks(self, handle):
        """Positions (in the variable's mesh order) of blocks that together hold the variable once: those at the
        first coordinate of every mesh axis that does not split it."""
        layout = handle.layout
        used = set(layout.sharding_specs)
        return [i for i, coords in enumerate(_coordinates(layout.mesh))
                if all(c == 0 for a, c in coords.items() if a not in used)]

    def device_indices(self, mesh):
        """Which of this runtime's devices ``mesh`` holds, in the mesh's order."""
        def short(name):        # "CPU:1", however the name is spelled
            return name.split("/")[-1].replace("device:", "")

        names = [short(d) for d in self.devices]
        return [names.index(short(d)) for d in mesh.local_devices()]

    # Steps --------------------------------------------------------------
    def compile(self, program, plan, seed):
        return ConsistentExecutable(self, program, plan, seed)

    def place(self, feed, nd_sbp):
        """A global host batch -> a DTensor with each device holding its shard only."""
        feed = np.asarray(feed)
        return self.to_mesh(feed, self.layout(nd_sbp, feed.ndim))

    def wrap_error(self, program, error, graphs=()):
        return step_error(program, error, graphs)


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
        placements.check_consistent(self.program)

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
            moves = [i for i, t in enumerate(values) if dtensor.fetch_layout(t).to_string() != targets[i].to_string()]
            self._relayouts[batch] = moves and (moves, tf.function(
                functools.partial(_relayout, [targets[i] for i in moves]), autograph=False))
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
            modes = self.program.output_modes + ["numpy"] * len(self.program.gradients)
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
        contexts = [_DTensorContext(p.phase, step, self.seed, rt, plan) for plan in plans]
        where_loss = rt.mesh_for(p.loss.node.placement) if p.loss is not None else rt.mesh
        envs, _, grads, watched = forward_backward(p, chunks, self._handles, contexts, mean=True,
                                                   loss_scope=lambda: dtensor.default_mesh(where_loss))
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
        update = self._updates_variables(step)
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
        for i, device in enumerate(self.runtime.devices):
            held = [self._position[v.path].get(i) for v in self._written]      # its block of each, or None
            pick = [None if j is None else blocks[j] for j, blocks in zip(held, list(grads) + list(updates))]
            with tf.device(device):
                self._apply_copies(self._blocks[i], pick[:len(grads)], pick[len(grads):], lr, step, update, norms)



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


def _coordinates(mesh):
    """Per device of ``mesh``, in its order, ``{axis: the device's index along it}``."""
    names = list(mesh.dim_names)
    sizes = [mesh.dim_size(a) for a in names]
    return [dict(zip(names, np.unravel_index(i, sizes))) for i in range(int(np.prod(sizes)))]


def _moved(tensor, runtime, source, target):
    """``tensor`` (on mesh ``source``) whole on each device of mesh ``target``: gathered where it is, then copied
    (``dtensor.copy_to_mesh``, inside a step function; its gradient copies back).  That copy is a Relayout across
    meshes, and DTensor (TF 2.21) cannot place the gradient where it meets an op with no other input on
    ``source``: a Dense layer without activation just before another placement failed to compile ("'tf.BiasAddGrad'
    op CopyToMeshOp must be used to send data across mesh"; with DTensor's own CopyToMesh op, its CopyToMeshGrad
    fails so).  So the tensor is first multiplied by ones made from it (an op, not a constant): the gradient meets
    that product, whose other input is on ``source``, first."""
    rank = tensor.shape.rank
    if tensor.dtype.is_floating:
        tensor = tensor * tf.raw_ops.OnesLike(x=tensor)
    whole = dtensor.relayout(tensor, runtime.replicated(rank, source))
    return dtensor.copy_to_mesh(whole, runtime.replicated(rank, target))


def _relayout(layouts, values):
    return [dtensor.relayout(v, layout) for v, layout in zip(values, layouts)]


def _draw_from_pair(sampler, shape, dtype, path, seed_0, seed_1):
    return draw(sampler, shape, dtype, tf.stack([seed_0, seed_1]), path)


def _unfolded(t):
    """A tensor of under 20 float32s as float64, passed so out of the gradient step: DTensor folds small replicated
    int32/int64/float32 inputs into a program as constants, and would compile a relayout function taking it again
    when one changes (a bias gradient: at the second step)."""
    return tf.cast(t, tf.float64) if t.dtype == tf.float32 and t.shape.num_elements() < 20 else t


class _DTensorContext(LoweringContext):
    """Realises the plan: each op's inputs are boxed to its signature's layouts, its outputs pinned to theirs.

    Partial sums have no DTensor layout: a P in the plan is left to DTensor's own SPMD expansion.
    """

    no_avg_pool_grad = True    # DTensor has no layout rule for AvgPoolGrad: kernels pool another way

    def __init__(self, phase, step, seed, runtime, plan):
        super().__init__(phase, step, seed, runtime.native_nchw)
        self.runtime, self.plan = runtime, plan
        self.mesh = runtime.mesh        # the mesh of the kernel being lowered: its placement's
        self.placement = None           # and that placement
        self._arrived = set()           # ids of Blobs already moved to the placement of the nodes being lowered
        self._copies = {}               # (id(tensor), placement) -> (tensor, its copy there): one copy per crossing

    @contextlib.contextmanager
    def kernel_scope(self, node):
        """A node of a placement on some devices makes its tensors on that placement's mesh."""
        if node.placement is None:
            yield
            return
        self.mesh, self.placement = self.runtime.mesh_for(node.placement), node.placement
        try:
            with dtensor.default_mesh(self.mesh):
                yield
        finally:
            self.mesh, self.placement = self.runtime.mesh, None

    def constant(self, value, dtype):
        return dtensor.copy_to_mesh(tf.constant(value, dtype), self.runtime.replicated(np.ndim(value), self.mesh))

    def random_uniform(self, shape, op_name, op_seed=None):
        """Drawn whole on every device, then sliced where consumed: the draw of one device, on every mesh.  Left to
        DTensor, a sharded draw differs between the replicas of one shard (a 2x2 mesh's dropout masks did), and
        variables that should stay replicated drift apart, silently."""
        step = self.step
        if self.placement is not None:      # the step counter lives on all devices: its copy on these
            self.step = self._copy(None, step, self.placement)
        try:
            draw = super().random_uniform(shape, op_name, op_seed)
        finally:
            self.step = step
        return dtensor.relayout(draw, self.runtime.replicated(draw.shape.rank, self.mesh))

    def input_sbp(self, node, i):
        return self.plan.input_sbp(node, i)

    def lay_out(self, tensor, nd_sbp):
        return self._relayout(tensor, nd_sbp, tensor.shape.rank)

    def _relayout(self, tensor, nd, rank):
        return dtensor.relayout(tensor, self.runtime.layout(nd, rank))

    def pin(self, blob, tensor):
        nd = self.plan.sbp.get(blob)
        if nd is None or partial_sum in nd or blob.node.placement is not None or self._kept(blob, nd):
            return tensor
        return self._relayout(tensor, nd, blob.ndim)

    def _kept(self, blob, nd):
        """DTensor keeps an operand's layout through an op whose other operands are replicated (relu, bias add,
        a square matmul by a replicated kernel): an output shaped like the first input and planned as that input
        was boxed, the others boxed to broadcast, has its layout already.  Pinning it anyway costs a Relayout
        and its gradient's RelayoutLike, each traced and expanded (1,200 ops in a 200-layer MLP)."""
        node = blob.node
        if node is None or not node.inputs or blob.shape != node.inputs[0].shape:
            return False
        boxed = [self.plan.wanted.get((node, i), self.plan.sbp.get(x)) for i, x in enumerate(node.inputs)]
        return boxed[0] == nd and all(b is not None and all(s == broadcast for s in b) for b in boxed[1:])

    def arrive(self, blob, tensor, placement):
        if blob.node.placement == placement:
            return tensor
        return self._copy(blob.node.placement, tensor, placement)

    def _copy(self, source, tensor, placement):
        """``tensor`` (on ``source``'s devices) on ``placement``'s, copied once however many ops there read it."""
        key = (id(tensor), placement)
        if key not in self._copies:
            rt = self.runtime
            self._copies[key] = (tensor, _moved(tensor, rt, rt.mesh_for(source), rt.mesh_for(placement)))
        return self._copies[key][1]

    @contextlib.contextmanager
    def arrived(self, blobs):
        before, self._arrived = self._arrived, {id(b) for b in blobs}
        try:
            yield
        finally:
            self._arrived = before

    def box(self, node, i, tensor):
        x, want = node.inputs[i], self.plan.wanted.get((node, i))
        if x.node.placement != node.placement:          # from one placement's devices to another's
            moved = tensor if id(x) in self._arrived else self._copy(x.node.placement, tensor, node.placement)
            if node.placement is None and want is not None and partial_sum not in want and \
                    any(s != broadcast for s in want):
                moved = self._relayout(moved, want, x.ndim)
            return moved
        if want is None or partial_sum in want or (want == self.plan.sbp[x] and partial_sum not in want):
            return tensor
        return self._relayout(tensor, want, x.ndim)
