"""Every op x every legal SBP signature computes what one device computes: forward and gradient.

For each op, one job function holds a branch per signature: fresh input
variables laid out (by layout rules) as the signature wants them, the op with
that signature forced, and ``sum(y * w)`` into a shared loss.  One SGD(1.0)
step later the outputs and every input variable (``x - dloss/dx``) must equal
a one-device run.  On a 2-device mesh each signature is tried; on a 2x2
``data x model`` mesh each is tried on both axes, paired with another.
Signatures that take or give partial sums are planned and boxed like any
other; DTensor has no partial-sum layout, so the engine computes them as the
plan's Boxing says the value must end up (DESIGN.md).  Signatures DTensor
cannot expand (a split convolution filter, channel-split pooling) are not
offered by the TF backend; forcing one is a named error before any step.
"""
import re

import numpy as np
import pytest

import flowlayers as flow
from flowlayers import ops
from flowlayers.errors import SBPError
from flowlayers.framework.variable import store
from flowlayers.ops.source import placeholder
from flowlayers.parallel import force_signature, propagate, signatures_of
from flowlayers.sbp import Split, broadcast
from flowlayers_tensorflow.consistent import supports

F, I = "float", "int"
MESHES = {"2": {"data": 2}, "2x2": {"data": 2, "model": 2}}


def _ints(hi):
    return lambda shape, rng: rng.integers(0, hi, shape).astype(np.int32)


# name: (op on the inputs, [(shape, kind or int sampler, trainable)])
CASES = {
    "matmul": (lambda a, b: ops.matmul.matmul(a, b), [((4, 6), F), ((6, 8), F)]),
    "matmul_tt": (lambda a, b: ops.matmul.matmul(a, b, transpose_a=True, transpose_b=True),
                  [((6, 4), F), ((8, 6), F)]),
    "batch_matmul": (lambda a, b: ops.matmul.matmul(a, b), [((2, 4, 6), F), ((2, 6, 4), F)]),
    "add": (lambda a, b: a + b, [((4, 6), F), ((6,), F)]),
    "subtract": (lambda a, b: a - b, [((4, 6), F), ((4, 6), F)]),
    "multiply": (lambda a, b: a * b, [((4, 6), F), ((4, 6), F)]),
    "divide": (lambda a, b: a / ops.elementwise.exp(b), [((4, 6), F), ((4, 6), F)]),
    "maximum": (lambda a, b: flow.math.maximum(a, b), [((4, 6), F), ((4, 6), F)]),
    "minimum": (lambda a, b: flow.math.minimum(a, b), [((4, 6), F), ((4, 6), F)]),
    "relu": (lambda a: flow.nn.relu(a), [((4, 6), F)]),
    "sigmoid": (lambda a: flow.math.sigmoid(a), [((4, 6), F)]),
    "tanh": (lambda a: flow.math.tanh(a), [((4, 6), F)]),
    "gelu": (lambda a: flow.nn.gelu(a), [((4, 6), F)]),
    "negative": (lambda a: -a, [((4, 6), F)]),
    "square": (lambda a: flow.math.square(a), [((4, 6), F)]),
    "bias_add": (lambda x, b: ops.conv.bias_add(x, b), [((4, 6), F), ((6,), F)]),
    "bias_add_nchw": (lambda x, b: ops.conv.bias_add(x, b, axis=1), [((2, 4, 3, 3), F), ((4,), F)]),
    "conv2d": (lambda x, k: ops.conv.conv2d(x, k, padding="SAME", data_format="NCHW"),
               [((2, 4, 5, 5), F), ((3, 3, 4, 6), F)]),
    "max_pool2d": (lambda x: flow.nn.max_pool2d(x, 2, 2, "VALID", data_format="NCHW"), [((2, 4, 4, 4), F)]),
    "avg_pool2d": (lambda x: flow.nn.avg_pool2d(x, 2, 2, "VALID", data_format="NCHW"), [((2, 4, 4, 4), F)]),
    "reshape": (lambda x: flow.reshape(x, (2, 2, 2, 9)), [((2, 4, 3, 3), F)]),
    "flatten": (lambda x: flow.flatten(x), [((2, 4, 3, 3), F)]),
    "transpose": (lambda x: flow.transpose(x, (1, 0, 2)), [((2, 4, 6), F)]),
    "concat": (lambda a, b: flow.concat([a, b], axis=1), [((4, 2), F), ((4, 6), F)]),
    "reduce_sum": (lambda x: flow.math.reduce_sum(x, axis=1), [((4, 6, 2), F)]),
    "reduce_mean": (lambda x: flow.math.reduce_mean(x, axis=0, keepdims=True), [((4, 6), F)]),
    "reduce_max": (lambda x: flow.math.reduce_max(x, axis=1), [((4, 6), F)]),
    "softmax": (lambda x: flow.nn.softmax(x), [((4, 6), F)]),
    "log_softmax": (lambda x: flow.nn.log_softmax(x, axis=0), [((4, 6), F)]),
    "sparse_softmax_ce": (lambda y, x: flow.nn.sparse_softmax_cross_entropy_with_logits(y, x),
                          [((4,), _ints(6)), ((4, 6), F)]),
    "softmax_ce": (lambda y, x: flow.nn.softmax_cross_entropy_with_logits(flow.nn.softmax(y), x),
                   [((4, 6), F), ((4, 6), F)]),
    "sigmoid_ce": (lambda y, x: flow.nn.sigmoid_cross_entropy_with_logits(flow.math.sigmoid(y), x),
                   [((4, 6), F), ((4, 6), F)]),
    "layer_norm": (lambda x, g, b: ops.norm.layer_norm(x, g, b, axes=(-1,)), [((4, 6), F), ((6,), F), ((6,), F)]),
    "batch_norm": (lambda x, g, b, m, v: ops.norm.batch_norm(x, g, b, m, v, axis=1, training=True)[0],
                   [((4, 6), F), ((6,), F), ((6,), F), ((6,), F), ((6,), F)]),
    "gather": (lambda t, i: ops.embedding.gather(t, i), [((6, 4), F), ((4, 2), _ints(6))]),
    "one_hot": (lambda i: ops.nn.one_hot(i, 6), [((4, 2), _ints(6))]),
    "argmax": (lambda x: ops.reduce.argmax(x, axis=1), [((4, 6), F)]),
    "greater": (lambda a, b: ops.elementwise.greater(a, b), [((4, 6), F), ((4, 6), F)]),
}


def _probe(name):
    """The op applied to placeholders: its node tells the legal signatures for these shapes."""
    fn, specs = CASES[name]
    xs = [placeholder(shape, flow.float32 if kind == F else flow.int32, f"probe{i}")
          for i, (shape, kind) in enumerate(specs)]
    return fn(*xs)


class _Probe:      # what propagate.signatures reads of a node, with a signature forced
    def __init__(self, node, forced):
        self.op, self.inputs, self.name = node.op, node.inputs, node.name
        self.attrs = {**node.attrs, "signature": forced}


def assignments(name, mesh):
    """Per-axis signature tuples to try: each legal signature on each mesh axis."""
    flow.config.set_view("consistent")
    flow.config.gpu_device_num(int(np.prod(list(mesh.values()))))
    flow.config.set_mesh(**mesh)
    node = _probe(name).node
    sigs = [s for s in signatures_of(node.outputs[0]) if supports(node.op.name, s)]
    axes = list(mesh.items())
    specs = [(b.shape, b.dtype) for b in node.outputs]

    def ok(forced):
        try:
            propagate.signatures(_Probe(node, forced), specs, axes, supports=supports)
            return True
        except SBPError:
            return False

    if len(axes) == 1:
        return [(s,) for s in sigs if ok((s,))]
    out = []
    for i, s in enumerate(sigs):       # s on "data" with some partner on "model", then the other way round
        for pair in ((s, t) for t in sigs[i + 1:] + sigs[:i + 1]):
            if ok(pair):
                out.append(pair)
                break
        for pair in ((t, s) for t in sigs[i + 1:] + sigs[:i + 1]):
            if ok(pair) and pair not in out:
                out.append(pair)
                break
    return out


def layout_spec(sbps, axes, rank):
    spec = [None] * rank
    for s, axis in zip(sbps, axes):
        if isinstance(s, Split):
            spec[s.axis] = axis
    return tuple(spec)


def run(name, branches, mesh=None):
    """One SGD(1.0) step of the job with one branch per forced signature tuple; outputs and variables."""
    fn, specs = CASES[name]
    flow.clear_session()
    if mesh is None:
        flow.config.set_view("mirrored")
        flow.config.gpu_device_num(1)
        flow.config.set_mesh()
    else:
        flow.config.set_view("consistent")
        flow.config.gpu_device_num(int(np.prod(list(mesh.values()))))
        flow.config.set_mesh(**mesh)
    rng = np.random.default_rng(0)
    consts = [[kind(shape, rng) if callable(kind) else None for shape, kind in specs] for _ in branches]
    weights = []
    rules = {}
    for k, forced in enumerate(branches):
        for i, (shape, kind) in enumerate(specs):
            if kind == F and mesh is not None:
                rules[f"^{re.escape(f'b{k}/in{i}')}$"] = layout_spec([s.inputs[i] for s in forced], list(mesh),
                                                                     len(shape))
    flow.config.set_layout_rules(rules)

    trains = any(kind == F for _, kind in specs) and _probe(name).dtype.is_floating

    @flow.global_function(type="train" if trains else "predict")
    def job():
        loss, outs = None, []
        for k, forced in enumerate(branches):
            xs = [flow.get_variable(f"b{k}/in{i}", shape, initializer=flow.random_normal_initializer())
                  if kind == F else flow.constant(consts[k][i], dtype=flow.int32)
                  for i, (shape, kind) in enumerate(specs)]
            y = fn(*xs)
            if mesh is not None:
                force_signature(y, *forced)
            outs.append(y)
            if y.dtype.is_floating:
                w = flow.constant(np.random.default_rng(k).normal(size=y.shape).astype(np.float32))
                term = flow.math.reduce_sum(y * w)
                loss = term if loss is None else loss + term
        if trains:
            flow.optimizer.SGD(flow.optimizer.PiecewiseConstantScheduler([], [1.0])).minimize(loss)
        return tuple(outs)

    outs = job()
    values = {p: v.numpy() for p, v in store.variables.items()}
    return outs, values


def check(name, mesh_name):
    mesh = MESHES[mesh_name]
    branches = assignments(name, mesh)
    assert branches, f"{name}: no legal signature on mesh {mesh}"
    ref_outs, ref_vars = run(name, [None] * len(branches))
    outs, variables = run(name, branches, mesh)
    for k, forced in enumerate(branches):
        sig = " | ".join(map(repr, forced))
        np.testing.assert_allclose(outs[k], ref_outs[k], rtol=1e-5, atol=1e-5, err_msg=f"{name} forward, {sig}")
        for path in ref_vars:
            if path.startswith(f"b{k}/"):
                np.testing.assert_allclose(variables[path], ref_vars[path], rtol=1e-5, atol=1e-5,
                                           err_msg=f"{name} gradient of {path}, {sig}")


@pytest.mark.parametrize("mesh_name", sorted(MESHES))
@pytest.mark.parametrize("name", sorted(CASES))
def test_every_signature_matches_one_device(name, mesh_name):
    check(name, mesh_name)


def test_forcing_a_signature_the_backend_cannot_realise_is_named():
    flow.clear_session()
    flow.config.set_view("consistent")
    flow.config.gpu_device_num(2)
    fn, specs = CASES["conv2d"]
    split_filter = next(s for s in signatures_of(_probe("conv2d")) if s.inputs[1] != broadcast)

    @flow.global_function(type="predict")
    def job():
        xs = [flow.get_variable(f"in{i}", shape, initializer=flow.random_normal_initializer())
              for i, (shape, _) in enumerate(specs)]
        return force_signature(fn(*xs), split_filter)

    with pytest.raises(SBPError, match=r"conv2d.*forced signature B x S\(3\) -> S\(1\).*can realise"):
        job()
