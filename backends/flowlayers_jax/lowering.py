"""Lowering: evaluate a Program's nodes with JAX ops, in topological order, while ``jax.jit`` traces a step.

Python runs here only while JAX traces.  A kernel that fails names its layer and op (an ``EngineError``), as on the
tensorflow backend.
"""
import hashlib

import jax
import jax.numpy as jnp

from flowlayers.errors import EngineError, FlowLayersError
from flowlayers.sbp import Split, partial_sum

from .kernels import KERNELS


class Context:
    """What kernels may ask of the step: the phase, randomness, constants, and (consistent view) the plan.

    ``rows``: in a replica whose rows were padded to the replicas' common size (mirrored view, a batch that does not
    divide), a boolean vector marking its real rows, for the kernels that reduce over rows (batch statistics)."""

    def __init__(self, phase, step, seed, replica=0, rows=None):
        self.phase, self.step, self.seed, self.replica, self.rows = phase, step, seed, replica, rows

    def training(self, flag):
        return self.phase == "train" if flag is None else bool(flag)

    def random_uniform(self, shape, op_name, op_seed=None):
        """Uniform [0, 1) values that depend on (seed, op, step, replica) only: reruns repeat them.  (JAX's
        threefry is partitionable: a sharded draw holds the numbers of the whole one.)"""
        digest = hashlib.sha256(f"{self.seed}:{op_name}:{op_seed}".encode()).digest()
        key = jax.random.key(int.from_bytes(digest[:4], "little") & 0x3FFFFFFF)
        key = jax.random.fold_in(jax.random.fold_in(key, self.replica), self.step)
        return jax.random.uniform(key, tuple(shape), jnp.float32)

    def constant(self, value, dtype):
        return jnp.asarray(value, dtype)

    def input_sbp(self, node, i):
        return None

    def splits(self, node, i, dim):
        nd = self.input_sbp(node, i)
        return nd is not None and Split(dim % node.inputs[i].ndim) in nd

    def lay_out(self, tensor, nd_sbp):
        return tensor

    def pin(self, blob, tensor):
        return tensor

    def box(self, node, i, tensor):
        return tensor


class PlannedContext(Context):
    """The consistent view: every Blob constrained to its planned sharding, each op's inputs to its signature's.

    A partial sum has no ``NamedSharding`` outside JAX's explicit-sharding mode: where the plan keeps one, the
    tensor is left unconstrained and XLA's partitioner places the reduction."""

    def __init__(self, phase, step, seed, plan, sharding):
        super().__init__(phase, step, seed)
        self.plan, self._sharding = plan, sharding

    def input_sbp(self, node, i):
        return self.plan.input_sbp(node, i)

    def lay_out(self, tensor, nd_sbp):
        return self._constrain(tensor, nd_sbp)

    def _constrain(self, tensor, nd):
        if nd is None or partial_sum in nd or not hasattr(tensor, "ndim"):
            return tensor
        return jax.lax.with_sharding_constraint(tensor, self._sharding(nd, tensor.ndim))

    def pin(self, blob, tensor):
        return self._constrain(tensor, self.plan.sbp.get(blob))

    def box(self, node, i, tensor):
        want = self.plan.wanted.get((node, i))
        if want is None or want == self.plan.sbp.get(node.inputs[i]):
            return tensor
        return self._constrain(tensor, want)


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
        return env
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
        out = kernel(node, *inputs, ctx=ctx)
    except FlowLayersError:
        raise
    except (ValueError, TypeError) as e:
        who = f"layer {node.layer.name!r}, op {node.op.name!r}" if node.layer else f"op {node.name!r}"
        raise EngineError(f"{who}: JAX rejected it while building the step: {str(e).rstrip('.')}; if its kernel "
                          f"is your own (register_kernel), make it agree with the shapes and dtypes the op's OpDef "
                          f"infers") from e
    for blob, array in zip(node.outputs, out if isinstance(out, tuple) else (out,)):
        if blob in probes:
            array = array + probes[blob]
        env[blob] = ctx.pin(blob, array)
