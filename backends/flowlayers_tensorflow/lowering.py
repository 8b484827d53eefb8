"""Lowering: evaluate a Program's nodes with TF ops, in topological order, inside a tf.function.

Python runs here only while TF traces; each node's ops are named after the
layer or op that made it, so engine errors point back to the user's model.
"""
import contextlib
import re

import numpy as np
import tensorflow as tf
from tensorflow.experimental import dtensor

from flowlayers import backend_common
from flowlayers.errors import EngineError, FlowLayersError
from flowlayers.sbp import broadcast, partial_sum

from .kernels import KERNELS
from .recompute import recomputed


class LoweringContext(backend_common.KernelContext):
    """What kernels may ask of the step: the phase, randomness, layout pinning, constants."""

    def __init__(self, phase, step, seed, native_nchw, replica_id=0):
        self.phase, self.step, self.seed, self.native_nchw = phase, step, seed, native_nchw
        self.replica_id = replica_id

    def random_uniform(self, shape, op_name, op_seed=None):
        """Uniform [0, 1) values that depend on (seed, op, step, replica) only: reruns repeat them."""
        base = backend_common.op_seed(self.seed, op_name, op_seed)
        seed = tf.stack([tf.constant(base, tf.int64) + tf.cast(self.replica_id, tf.int64) * 1_000_003,
                         tf.cast(self.step, tf.int64)])
        return tf.random.stateless_uniform(shape, seed)

    def constant(self, value, dtype):
        return tf.constant(value, dtype)

    def variable(self, handle):
        return handle

    def arrive(self, blob, tensor, placement):
        """Hook for the consistent view: ``blob``'s tensor moved to ``placement``'s devices ahead of its use."""
        return tensor

    def arrived(self, blobs):
        """Hook for the consistent view: within it, ``blobs`` are where their consumers run (see ``arrive``)."""
        return contextlib.nullcontext()

    def kernel_scope(self, node):
        """Hook for the consistent view: where ``node``'s kernel makes its tensors (its placement's mesh)."""
        return contextlib.nullcontext()


def run_graph(program, env, handles, ctx):
    """Fill ``env`` (Blob -> tensor) for every node of ``program``; placeholders must already be in it.  In a
    training step the nodes of a ``flow.recompute`` segment (``program.units``) run as one recomputed function,
    returning what is used after it: by nodes outside it or by the step (``program.results``)."""
    nodes, units, keep = program.nodes, program.units, program.results
    if len(units) == len(nodes):
        for node in nodes:
            _run_node(node, env, handles, ctx)
        return env
    used_after = {id(b) for b in keep}
    for node in nodes:
        for x in node.inputs:
            if x.node.recompute != node.recompute or x.node.placement != node.placement:
                used_after.add(id(x))
    for unit in units:
        if isinstance(unit, list):
            _run_segment(unit, env, handles, ctx, used_after)
        else:
            _run_node(unit, env, handles, ctx)
    return env


def _run_segment(nodes, env, handles, ctx, used_after):
    inside = {id(n) for n in nodes}
    inputs = list({id(x): x for n in nodes for x in n.inputs if id(x.node) not in inside}.values())
    outputs = [b for n in nodes for b in n.outputs if id(b) in used_after]

    def forward(*values):      # run twice: in the forward pass, and again by the backward pass
        local = dict(zip(inputs, values))
        with ctx.arrived(inputs):
            for node in nodes:
                _run_node(node, local, handles, ctx)
        return [local[b] for b in outputs]

    # a variable's value read here, where it is kept; a tensor from another placement moved here, as the segment's
    # inputs must all be on its devices
    values = [ctx.arrive(x, tf.convert_to_tensor(env[x]), nodes[0].placement) for x in inputs]
    env.update(zip(outputs, recomputed(forward)(*values)))


def _run_node(node, env, handles, ctx):
    if node.op.kind == "placeholder":
        return
    if node.op.kind == "variable":
        env[node.outputs[0]] = ctx.variable(handles[node.variable.path])
        return
    kernel = KERNELS.get(node.op.name)
    if kernel is None:
        raise EngineError(f"op {node.op.name!r} (node {node.name!r}): the tensorflow backend has no lowering "
                          f"for it; expected one of {sorted(KERNELS)}")
    with tf.name_scope(node.name.replace(":", "_")):
        try:
            inputs = [ctx.box(node, i, env[x]) for i, x in enumerate(node.inputs)]
            with ctx.kernel_scope(node):
                out = kernel(node, *inputs, ctx=ctx)
        except FlowLayersError:
            raise
        except (ValueError, TypeError, tf.errors.OpError) as e:
            who = f"layer {node.layer.name!r}, op {node.op.name!r}" if node.layer else f"op {node.name!r}"
            raise EngineError(f"{who}: TensorFlow rejected it while building the step: {str(e).rstrip('.')}; "
                              f"if its kernel is your own (register_kernel), make it agree with the shapes and "
                              f"dtypes the op's OpDef infers") from e
    for blob, tensor in zip(node.outputs, out if isinstance(out, tuple) else (out,)):
        env[blob] = ctx.pin(blob, tensor)


def step_error(program, error, graphs=()):
    """An error TF raised while a step ran, as an EngineError naming the layer and op it came from.

    TF names the failing kernel (``{{node <scopes>/<TF op>}}``, ``Detected at node ...``); the scopes are the
    Program's node names (run_graph opens one per node), so the longest node name among them is the culprit.
    DTensor's compile errors name only the TF op type (``see current operation: ... "tf.SoftsignGrad"``): the
    ops of that type in the step's traced ``graphs`` give the scopes then.
    """
    message = getattr(error, "message", str(error))
    scopes = [a or b for a, b in re.findall(r"\{\{node ([^}]+)\}\}|Detected at node (\S+)", message)]
    layout_error = re.search(r":\d+:\d+: error: (.+)", message)     # DTensor's SPMD expansion (MLIR diagnostics)
    op_type = re.search(r'see current operation: [^\n]*?= "tf\.(\w+)"', message)
    if op_type:
        scopes += [op.name for g in graphs for op in g.get_operations() if op.type == op_type.group(1)]
    culprit = None
    for node in program.nodes:
        scope = node.name.replace(":", "_")
        if any(re.search(rf"(^|/){re.escape(scope)}/", s + "/") for s in scopes) and (
                culprit is None or len(scope) > len(culprit.name)):
            culprit = node
    who = ""
    if culprit is not None:
        who = (f"layer {culprit.layer.name!r}, op {culprit.op.name!r}" if culprit.layer is not None
               else f"op {culprit.name!r}") + ": "
    if layout_error:
        reason = "DTensor cannot lay this step out: " + layout_error.group(1).strip()
        fix = ("write the op's kernel with TF ops DTensor can lay out, or give this layer other layouts (layout "
               "rules, with_sbp), or run the model in the mirrored view")
    else:
        reason = _reason(message)
        if "cancelled" in reason:
            fix = ("a collective was cancelled by an error on another device, which DTensor does not report; run "
                   "the step on one device to see it")
        else:
            fix = "check the values this op receives: values computed inside the model are not checked before a step"
    return EngineError(f"step {program.name!r} failed in the engine: {who}{reason}; {fix}")


def _reason(message):
    """The line of a TF error message that says what went wrong, without TF's graph bookkeeping."""
    coded = re.search(r"\b[A-Z][A-Z_]+:[ \t]+(\S.*)", message)
    if coded:
        return re.sub(r"\{\{function_node [^}]*\}\}\s*", "", coded.group(1)).strip()
    lines = [re.sub(r"\{\{function_node [^}]*\}\}\s*|\s*\[Op:[^\]]*\]\s*$", "", line) for line in message.splitlines()]
    said = [line.strip() for line in lines if line.strip() and not line[0].isspace()
            and not line.startswith(("Graph execution error", "Detected at node", "[["))]
    return said[-1] if said else message.strip()


def relayout(tensor, layout, source=None):
    """``dtensor.relayout(tensor, layout)``, where ``tensor`` is laid out as ``source`` (a Layout; None: unknown),
    without DTensor's all-to-all where TF 2.21 gets it wrong.

    DTensor moves a mesh axis from one split dim to another (S(i) -> S(j)) with an all-to-all, and on CPU meshes
    (1-D and 2-D alike) that all-to-all silently reorders the blocks of a tensor of rank 4 or more when neither
    dim is 0 (for most shapes, not all): the blocks of a (1, 2, 2, 2) tensor moved from S(1) to S(2) come back as
    [0, 4, 1, 5] for [0, 1, 4, 5] (bench/probe_dtensor_einsum_bias.py; rank 3, and any move to or from dim 0, came
    out exact).  Such a move goes in two: the moving mesh axes gathered first (an all-gather), then sliced where
    the layout splits them (local slices; the gradients' RelayoutLike mirror both).  Every other relayout is
    DTensor's own, as is one from a layout not known here (``source`` None: a Blob's pin, where DTensor chose
    the layout its op's output has)."""
    if source is not None:
        middle = _unmoved(source, layout)
        if middle is not None:
            tensor = dtensor.relayout(tensor, middle)
    return dtensor.relayout(tensor, layout)


def _unmoved(source, target):
    """The layout ``source`` less the mesh axes that move between two split dims (neither of them dim 0) on the way
    to ``target``, for a tensor of rank 4 or more; None where no such axis moves (or the rank is lower)."""
    before, after = list(source.sharding_specs), list(target.sharding_specs)
    if len(before) < 4 or source.mesh != target.mesh:
        return None
    moving = {axis for i, axis in enumerate(before) if axis in after and after.index(axis) != i
              and axis not in (dtensor.UNSHARDED, dtensor.MATCH)}
    if not any(before.index(axis) and after.index(axis) for axis in moving):
        return None
    return dtensor.Layout([dtensor.UNSHARDED if axis in moving else axis for axis in before], source.mesh)


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



class DTensorContext(LoweringContext):
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

    def _relayout(self, tensor, nd, rank, source=None):
        """``tensor`` laid out as ``nd``; ``source``, the nd-SBP it is laid out as where known (``relayout``)."""
        layout = self.runtime.layout(nd, rank)
        known = source is not None and partial_sum not in source
        return relayout(tensor, layout, self.runtime.layout(source, rank) if known else None)

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
        # pinned as planned (``pin``), or kept so by DTensor: laid out as its plan says
        return self._relayout(tensor, want, x.ndim, source=self.plan.sbp[x])

