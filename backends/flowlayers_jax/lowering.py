"""Lowering: evaluate a Program's nodes with JAX ops, in topological order, while ``jax.jit`` traces a step.

Python runs here only while JAX traces.  A kernel that fails names its layer and op (an ``EngineError``), as on the
tensorflow backend.
"""
import jax
import jax.numpy as jnp

from flowlayers import backend_common
from flowlayers.errors import EngineError, FlowLayersError
from flowlayers.sbp import Split, broadcast, partial_sum

from .kernels import KERNELS

# ops whose partial sum over a split input is the op on each device's block alone (a contraction or sum over the
# split dim): a Partial is made of their blocks; any other op making a kept partial sum computes the whole value
BLOCKWISE = ("matmul", "einsum", "reduce_sum")
# ops never run on stacked partial values: XLA's partitioner aborts the process on a batched convolution whose
# batch is laid out over a mesh axis (convolution_handler.cc: "Check failed: new_input_batch_size %
# new_output_batch_size == 0"); their partial-sum inputs are made whole first
WHOLE_INPUTS = ("conv2d", "conv2d_transpose")


@jax.tree_util.register_pytree_node_class
class Partial:
    """A Blob the plan keeps a partial sum over mesh ``axis`` for a consumer that takes it so: ``value`` stacks
    one partial value per device along that axis in a leading dim laid out over it; the Blob is their sum.  JAX's
    automatic sharding has no partial-sum layout, and left unconstrained XLA would reduce it where it is made."""

    def __init__(self, value, axis):
        self.value, self.axis = value, axis

    def tree_flatten(self):
        return (self.value,), self.axis

    @classmethod
    def tree_unflatten(cls, axis, children):
        return cls(children[0], axis)

    def whole(self):
        return jnp.sum(self.value, axis=0)


class Context(backend_common.KernelContext):
    """What kernels may ask of the step: the phase, randomness, constants, and (consistent view) the plan.

    ``rows``: in a replica whose rows were padded to the replicas' common size (mirrored view, a batch that does not
    divide), a boolean vector marking its real rows, for the kernels that reduce over rows (batch statistics)."""

    def __init__(self, phase, step, seed, replica=0, rows=None):
        self.phase, self.step, self.seed, self.replica, self.rows = phase, step, seed, replica, rows

    def random_uniform(self, shape, op_name, op_seed=None):
        """Uniform [0, 1) values that depend on (seed, op, step, replica) only: reruns repeat them.  (JAX's
        threefry is partitionable: a sharded draw holds the numbers of the whole one.)"""
        key = jax.random.key(backend_common.op_seed(self.seed, op_name, op_seed))
        key = jax.random.fold_in(jax.random.fold_in(key, self.replica), self.step)
        return jax.random.uniform(key, tuple(shape), jnp.float32)

    def constant(self, value, dtype):
        return jnp.asarray(value, dtype)


    def run(self, kernel, node, inputs):
        """The kernel on the (boxed) inputs."""
        return kernel(node, *inputs, ctx=self)

    def whole(self, blob, value):
        """A Blob's value as one logical array."""
        return value


class PlannedContext(Context):
    """The consistent view: every Blob constrained to its planned sharding, each op's inputs to its signature's.

    A partial sum has no ``NamedSharding`` outside JAX's explicit-sharding mode.  Where a consumer takes a Blob
    as the partial sum the plan keeps over one mesh axis, the Blob is a ``Partial`` (one partial value per device,
    stacked along a dim laid out over that axis): the ops between run on each partial value (``jax.vmap``), and
    the Boxing to S or B is the sum over that dim, where the plan puts it.  Any other partial sum is left
    unconstrained, and XLA's partitioner reduces it where it is made."""

    def __init__(self, phase, step, seed, plan, sharding):
        super().__init__(phase, step, seed)
        self.plan, self._sharding = plan, sharding
        self._sizes = dict(plan.axes)
        self._axis_index = {a: k for k, (a, _) in enumerate(plan.axes)}
        self.kept = _kept_partials(plan)

    def input_sbp(self, node, i):
        return self.plan.input_sbp(node, i)

    def lay_out(self, tensor, nd_sbp):
        return self._constrain(tensor, nd_sbp)

    def _constrain(self, tensor, nd):
        if isinstance(tensor, Partial):
            return self._partial(tensor.value, nd, tensor.axis)
        if nd is None or partial_sum in nd or not hasattr(tensor, "ndim"):
            return tensor
        return jax.lax.with_sharding_constraint(tensor, self._sharding(nd, tensor.ndim))

    def _partial(self, stacked, nd, axis):
        """``stacked`` (partial values over ``axis``) as a Partial laid out as ``nd`` says over the other axes."""
        rest = tuple(broadcast if a == axis or s == partial_sum else s for (a, _), s in zip(self.plan.axes, nd))
        inner = self._sharding(rest, stacked.ndim - 1)
        sharding = jax.sharding.NamedSharding(inner.mesh, jax.sharding.PartitionSpec(axis, *inner.spec))
        return Partial(jax.lax.with_sharding_constraint(stacked, sharding), axis)

    def _as_partial(self, blob, tensor, nd, axis):
        """A whole value as partial values over ``axis`` that sum to it: each device along the axis keeps its
        block of a dim split over it (zeros elsewhere), or the first keeps the whole value."""
        n, k = self._sizes[axis], self._axis_index[axis]
        have = self.plan.sbp.get(blob)
        index = jax.lax.broadcasted_iota(jnp.int32, (n,) + (1,) * tensor.ndim, 0)
        if have is not None and isinstance(have[k], Split) and tensor.shape[have[k].axis] % n == 0:
            dim = have[k].axis
            block = tensor.shape[dim] // n
            owner = jax.lax.broadcasted_iota(jnp.int32, (1,) + tensor.shape, dim + 1) // block
            keep = owner == index
        else:
            keep = index == 0
        return self._partial(jnp.where(keep, tensor[None], jnp.zeros((), tensor.dtype)), nd, axis)

    def whole(self, blob, value):
        if not isinstance(value, Partial):
            return value
        nd = self.plan.sbp.get(blob)
        return self._constrain(value.whole(), None if nd is None else tuple(
            broadcast if a == value.axis else s for (a, _), s in zip(self.plan.axes, nd)))

    def pin(self, blob, tensor):
        nd = self.plan.sbp.get(blob)
        axis = self.kept.get(blob)
        if isinstance(tensor, Partial) and (nd is None or nd[self._axis_index[tensor.axis]] != partial_sum):
            tensor = self.whole(blob, tensor)       # a partial over an axis the plan makes whole here
        if axis is not None and not isinstance(tensor, Partial):
            return self._as_partial(blob, tensor, nd, axis)
        return self._constrain(tensor, nd)

    def box(self, node, i, tensor):
        want = self.plan.wanted.get((node, i))
        x = node.inputs[i]
        if isinstance(tensor, Partial):
            if want is not None and want[self._axis_index[tensor.axis]] == partial_sum:
                return self._constrain(tensor, want)
            tensor = tensor.whole()     # the Boxing P -> S or B: the sum over the devices along the axis
        elif want is None or want == self.plan.sbp.get(x):
            return tensor
        return self._constrain(tensor, want)

    def run(self, kernel, node, inputs):
        """The kernel on each partial value where an input is a Partial (the op is linear in the inputs its
        signature takes as P: any other such input is made partial values too); on each device's block where it
        makes a kept partial sum from split inputs (``BLOCKWISE``); else on the inputs as they are."""
        if node.op.name in WHOLE_INPUTS:
            return kernel(node, *[v.whole() if isinstance(v, Partial) else v for v in inputs], ctx=self)
        axis = next((v.axis for v in inputs if isinstance(v, Partial)), None)
        if axis is None:
            axis = self._blockwise_axis(node)
            blocks = None if axis is None else self._blocks(node, inputs, axis)
            if blocks is None:
                return kernel(node, *inputs, ctx=self)
            inputs = blocks
        else:       # one axis at a time: partial sums over another are made whole (XLA reduces them)
            k = self._axis_index[axis]
            inputs = [v.whole() if isinstance(v, Partial) and v.axis != axis else v for v in inputs]
            inputs = [v if isinstance(v, Partial) or self.input_sbp(node, i)[k] != partial_sum else
                      self._as_partial(node.inputs[i], v, self.input_sbp(node, i), axis)
                      for i, v in enumerate(inputs)]
        out = jax.vmap(lambda *a: kernel(node, *a, ctx=self), in_axes=[0 if isinstance(v, Partial) else None
                                                                       for v in inputs], spmd_axis_name=axis)(
            *[v.value if isinstance(v, Partial) else v for v in inputs])
        return tuple(Partial(o, axis) for o in out) if isinstance(out, tuple) else Partial(out, axis)

    def _blockwise_axis(self, node):
        """The axis over which ``node`` makes a kept partial sum from inputs split over it, if it is BLOCKWISE."""
        axis = next((self.kept[b] for b in node.outputs if b in self.kept), None)
        if axis is None:
            return None
        k = self._axis_index[axis]
        return axis if _makes_blocks(node, [self.input_sbp(node, i)[k] for i in range(len(node.inputs))]) else None

    def _blocks(self, node, inputs, axis):
        """Each input split over ``axis`` as its blocks stacked in a leading dim laid out over it (None where a
        split dim does not divide)."""
        n, k = self._sizes[axis], self._axis_index[axis]
        out = []
        for i, v in enumerate(inputs):
            nd = self.input_sbp(node, i)
            if not isinstance(nd[k], Split):
                out.append(v)
                continue
            dim = nd[k].axis
            if v.shape[dim] % n:
                return None
            stacked = jnp.moveaxis(v.reshape(v.shape[:dim] + (n, v.shape[dim] // n) + v.shape[dim + 1:]), dim, 0)
            out.append(self._partial(stacked, nd, axis))
        return out


def run_graph(program, env, values, ctx, probes=None):
    """Fill ``env`` (Blob -> array) for every node of ``program``; placeholders must already be in it; ``values``
    holds each variable's array by path.  ``probes`` (Blob -> zeros) are added to those Blobs where they are made:
    the gradient of a probe is the Blob's.  In a training step the nodes of a ``flow.recompute`` segment
    (``program.units``) run as one ``jax.checkpoint``: the backward pass computes their activations again."""
    probes = probes or {}
    units = program.units
    if len(units) == len(program.nodes):
        for node in program.nodes:
            _run_node(node, env, values, ctx, probes)
    else:
        used_after = {id(b) for b in program.results}
        for node in program.nodes:
            for x in node.inputs:
                if x.node.recompute != node.recompute:
                    used_after.add(id(x))
        for unit in units:
            if isinstance(unit, list):
                _run_segment(unit, env, values, ctx, probes, used_after)
            else:
                _run_node(unit, env, values, ctx, probes)
    for blob in program.results:        # what the step returns, whole
        env[blob] = ctx.whole(blob, env[blob])
    return env


def _run_segment(nodes, env, values, ctx, probes, used_after):
    inside = {id(n) for n in nodes}
    inputs = list({id(x): x for n in nodes for x in n.inputs if id(x.node) not in inside}.values())
    outputs = [b for n in nodes for b in n.outputs if id(b) in used_after]

    def forward(*arrays):
        local = dict(zip(inputs, arrays))
        for node in nodes:
            _run_node(node, local, values, ctx, probes)
        return [local[b] for b in outputs]

    env.update(zip(outputs, jax.checkpoint(forward)(*[env[x] for x in inputs])))


def _run_node(node, env, values, ctx, probes):
    if node.op.kind == "placeholder":
        return
    if node.op.kind == "variable":
        env[node.outputs[0]] = values[node.variable.path]
        return
    kernel = KERNELS.get(node.op.name)
    if kernel is None:
        raise EngineError(f"op {node.op.name!r} (node {node.name!r}): the jax backend has no lowering for it; "
                          f"expected one of {sorted(KERNELS)}")
    try:
        inputs = [ctx.box(node, i, env[x]) for i, x in enumerate(node.inputs)]
        out = ctx.run(kernel, node, inputs)
    except FlowLayersError:
        raise
    except (ValueError, TypeError) as e:
        who = f"layer {node.layer.name!r}, op {node.op.name!r}" if node.layer else f"op {node.name!r}"
        raise EngineError(f"{who}: JAX rejected it while building the step: {str(e).rstrip('.')}; if its kernel "
                          f"is your own (register_kernel), make it agree with the shapes and dtypes the op's OpDef "
                          f"infers") from e
    for blob, array in zip(node.outputs, out if isinstance(out, tuple) else (out,)):
        if blob in probes:
            array = ctx.whole(blob, array) + probes[blob]
        env[blob] = ctx.pin(blob, array)


def _kept_partials(plan):
    """Blob -> the mesh axis over which the plan keeps it a partial sum that a consumer takes as one, where its
    partial values can be made: by a ``BLOCKWISE`` op from inputs split over the axis, or by an op from such
    partial values (not ``WHOLE_INPUTS``).  A Blob partial over several axes, or made otherwise, is left to XLA's
    partitioner, which reduces it where it is made: made partial there, it would be reduced twice."""
    made = {}
    for node, sigs in plan.signatures.items():
        for k, ((axis, n), sig) in enumerate(zip(plan.axes, sigs)):
            if n == 1 or partial_sum not in sig.outputs:
                continue
            ins = [plan.input_sbp(node, i)[k] for i in range(len(node.inputs))]
            if partial_sum in ins:
                ok = node.op.name not in WHOLE_INPUTS and any(
                    made.get(x) == axis for x, s in zip(node.inputs, ins) if s == partial_sum)
            else:
                ok = _makes_blocks(node, ins)
            for b, nd in zip(node.outputs, (plan.sbp[b] for b in node.outputs)):
                if ok and nd[k] == partial_sum and sum(s == partial_sum for s in nd) == 1:
                    made[b] = axis
    index = {axis: k for k, (axis, _) in enumerate(plan.axes)}
    return {node.inputs[i]: made[node.inputs[i]] for (node, i), want in plan.wanted.items()
            if node.inputs[i] in made and want[index[made[node.inputs[i]]]] == partial_sum}


def _makes_blocks(node, ins):
    """Whether ``node``, its inputs arriving as ``ins`` over one axis, makes a partial sum over it from their
    blocks: a ``BLOCKWISE`` op with some input split over the axis, every other whole there."""
    return (node.op.name in BLOCKWISE and any(isinstance(s, Split) for s in ins)
            and all(isinstance(s, Split) or s == broadcast for s in ins))
