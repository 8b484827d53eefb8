"""Every op x every legal SBP signature computes what one device computes: forward and gradient.

For each op, one job function holds a branch per signature: fresh input
variables laid out (by layout rules) as the signature wants them, the op with
that signature forced, and ``sum(y * w)`` into a shared loss.  One SGD(1.0)
step later the outputs and every input variable (``x - dloss/dx``) must equal
a one-device run.  On a 2-device mesh every signature the backend supports is
tried; on a 2x2 ``data x model`` mesh each is tried on both axes, paired with
another; a signature that no case's shapes let divide fails the test.

An input a signature wants as a partial sum (P) is not a variable but the
output of a matmul whose contraction axis is split over that mesh axis
(``S(1) x S(0) -> P``; for a 1-D input a sum over a split axis,
``S(0) -> P``), so the plan really hands the op a P value, with no Boxing in
between, and the gradient flows back through that matmul to its variables.
This proves that the planner accepts P where it arises, that the TF backend
lowers a P-producing op feeding a P-consuming op to the values and gradients
of one device, and that the plan's shapes and layouts around them are
consistent.  It does not prove that each P signature is right for real
partial sums: DTensor has no public partial-sum layout, so the engine reduces
at the matmul and the op computes on whole values (DESIGN.md, "SBP,
precisely"); a wrong P rule in the planner would cost bytes, not results.

Signatures DTensor cannot expand (a split convolution filter, channel-split
pooling) are not offered by the TF backend; forcing one is a named error
before any step.  The jax backend realises every signature (a
``NamedSharding`` each), so all are tried there.  Dropout masks are a
documented view-switch exception: its signatures are compared with one
device at rate 0, and at rate 0.5 every
signature must keep what it drops and scale what it keeps, forward and
backward alike.
"""
import re

import numpy as np
import pytest

import flowlayers as flow
from flowlayers import ops
from flowlayers.errors import SBPError
from flowlayers.framework.op_def import Signature
from flowlayers.framework.variable import store
from flowlayers.ops import along_axis, augment, conv3d, depthwise, elementwise as ew, indexing, reduce
from flowlayers.ops.conv import bias_add, conv2d, conv2d_transpose
from flowlayers.ops.matmul import matmul
from flowlayers.ops.norm import batch_norm, layer_norm
from flowlayers.ops.recurrent import rnn
from flowlayers.ops.shape import pad
from flowlayers.ops.source import placeholder
from flowlayers.parallel import force_signature, propagate, signatures_of
from flowlayers.sbp import Split, broadcast, partial_sum
from places import use

F = "float"          # N(0, 1)
POS = "positive"     # U(0.5, 2): inside the domain of log, sqrt, rsqrt and pow's base
FLOATS = {F: lambda: flow.random_normal_initializer(), POS: lambda: flow.random_uniform_initializer(0.5, 2.0)}
MESHES = {"2": {"data": 2}, "2x2": {"data": 2, "model": 2}}
CONTRACTED = 4       # contraction size of the matmul that makes a partial-sum input


def _ints(hi):
    return lambda shape, rng: rng.integers(0, hi, shape).astype(np.int32)


def declared_supports():
    """What the planner asks of the running backend (its ``Capabilities``): its ``supports(op_name, signature)``
    (TF's DTensor: not every signature), or None where it realises every one (JAX: any ``NamedSharding``)."""
    return flow.engine.capabilities().supports


def supports(op_name, sig):
    declared = declared_supports()
    return declared is None or declared(op_name, sig)


def _unary(fn, kind=F):
    return (fn, [((4, 6), kind)])


def constrained(x, nd_sbp=None):
    """``x.with_sbp(*nd_sbp)``: the SBP pinned is the signature tried (see run); one device has no constraint."""
    return x.with_sbp(*nd_sbp) if nd_sbp else ops.elementwise.identity(x)


# name: (op on the inputs, [(shape, float kind or int sampler)])
CASES = {
    "matmul": (lambda a, b: matmul(a, b), [((4, 6), F), ((6, 8), F)]),
    "matmul_tt": (lambda a, b: matmul(a, b, transpose_a=True, transpose_b=True),
                  [((6, 4), F), ((8, 6), F)]),
    "batch_matmul": (lambda a, b: matmul(a, b), [((2, 4, 6), F), ((2, 6, 4), F)]),
    "einsum_projection": (lambda x, k: flow.einsum("bqd,dhk->bqhk", x, k), [((2, 4, 6), F), ((6, 2, 4), F)]),
    "einsum_attention": (lambda q, k: flow.einsum("bqhk,bvhk->bhqv", q, k), [((2, 4, 2, 6), F), ((2, 4, 2, 6), F)]),
    "einsum_sum": (lambda x: flow.einsum("abc->ac", x), [((4, 6, 2), F)]),
    "add": (lambda a, b: a + b, [((4, 6), F), ((6,), F)]),
    "subtract": (lambda a, b: a - b, [((4, 6), F), ((4, 6), F)]),
    "multiply": (lambda a, b: a * b, [((4, 6), F), ((4, 6), F)]),
    "divide": (lambda a, b: a / b, [((4, 6), F), ((4, 6), POS)]),
    "maximum": (lambda a, b: flow.math.maximum(a, b), [((4, 6), F), ((4, 6), F)]),
    "minimum": (lambda a, b: flow.math.minimum(a, b), [((4, 6), F), ((4, 6), F)]),
    "pow": (lambda a, b: flow.math.pow(a, b), [((4, 6), POS), ((4, 6), F)]),
    # about half the elements equal: a against max(a, b)
    "equal": (lambda a, b: flow.math.equal(a, flow.math.maximum(a, b)), [((4, 6), F), ((4, 6), F)]),
    "greater": (lambda a, b: ops.elementwise.greater(a, b), [((4, 6), F), ((4, 6), F)]),
    "relu": _unary(lambda a: flow.nn.relu(a)),
    "relu6": _unary(lambda a: flow.nn.relu6(a * 4.0)),      # some inputs beyond 6
    "sigmoid": _unary(lambda a: flow.math.sigmoid(a)),
    "tanh": _unary(lambda a: flow.math.tanh(a)),
    "gelu": _unary(lambda a: flow.nn.gelu(a)),
    "softplus": _unary(lambda a: flow.nn.softplus(a)),
    "softsign": _unary(lambda a: flow.nn.softsign(a)),
    "silu": _unary(lambda a: flow.nn.silu(a)),
    "elu": _unary(lambda a: flow.nn.elu(a)),
    "selu": _unary(lambda a: flow.nn.selu(a)),
    "hard_sigmoid": _unary(lambda a: flow.nn.hard_sigmoid(a * 4.0)),   # some inputs beyond +-3
    "leaky_relu": _unary(lambda a: flow.nn.leaky_relu(a, alpha=0.1)),
    "negative": _unary(lambda a: -a),
    "abs": _unary(lambda a: flow.math.abs(a)),
    "identity": _unary(lambda a: ops.elementwise.identity(a)),
    "square": _unary(lambda a: flow.math.square(a)),
    "exp": _unary(lambda a: flow.math.exp(a)),
    "log": _unary(lambda a: flow.math.log(a), POS),
    "sqrt": _unary(lambda a: flow.math.sqrt(a), POS),
    "rsqrt": _unary(lambda a: flow.math.rsqrt(a), POS),
    "cast": _unary(lambda a: flow.cast(a, flow.float64)),
    "sbp_constraint": _unary(constrained),
    "dropout": _unary(lambda a: flow.nn.dropout(a, 0.0)),
    "gaussian_noise": _unary(lambda a: ops.nn.gaussian_noise(a, 0.0)),
    # augmentation with fixed draws (a range of one value): what one device computes
    "random_affine": (lambda x: augment.random_affine(x, "rotation", (0.1, 0.1), "reflect"),
                      [((2, 5, 4, 4), F)]),
    "random_affine_nchw": (lambda x: augment.random_affine(x, "zoom", (0.2, 0.2, -0.3, -0.3), "constant",
                                                               data_format="NCHW"), [((2, 4, 5, 4), F)]),
    "random_contrast": (lambda x: augment.random_contrast(x, 0.5, -0.5, (-1.0, 1.0)), [((2, 5, 4, 4), F)]),
    "random_flip": (lambda x: augment.random_flip(x, True, True, training=False), [((2, 5, 4, 4), F)]),
    "bias_add": (lambda x, b: bias_add(x, b), [((4, 6), F), ((6,), F)]),
    "bias_add_nchw": (lambda x, b: bias_add(x, b, axis=1), [((2, 4, 4, 2), F), ((4,), F)]),
    "conv2d": (lambda x, k: conv2d(x, k, padding="SAME", data_format="NCHW"),
               [((2, 4, 5, 5), F), ((3, 3, 4, 6), F)]),
    "conv2d_transpose": (lambda x, k: conv2d_transpose(x, k, 2, padding="SAME", data_format="NCHW"),
                         [((2, 4, 3, 3), F), ((3, 3, 6, 4), F)]),
    "conv3d": (lambda x, k: conv3d.conv3d(x, k, padding="SAME"), [((2, 3, 3, 3, 4), F), ((2, 2, 2, 4, 6), F)]),
    "depthwise_conv2d": (lambda x, k: depthwise.depthwise_conv2d(x, k, 2, "SAME", "NHWC"),
                         [((2, 5, 5, 4), F), ((3, 3, 4, 2), F)]),
    "max_pool3d": (lambda x: conv3d.max_pool3d(x, 2, padding="SAME"), [((2, 3, 4, 4, 4), F)]),
    "avg_pool3d": (lambda x: conv3d.avg_pool3d(x, (2, 1, 2), 1, "SAME", "NCDHW"), [((2, 4, 3, 4, 5), F)]),
    "max_pool2d": (lambda x: flow.nn.max_pool2d(x, 2, 2, "VALID", data_format="NCHW"), [((2, 4, 4, 4), F)]),
    "avg_pool2d": (lambda x: flow.nn.avg_pool2d(x, 2, 2, "VALID", data_format="NCHW"), [((2, 4, 4, 4), F)]),
    "reshape": (lambda x: flow.reshape(x, (2, 2, 2, 8)), [((2, 4, 4, 2), F)]),
    "flatten": (lambda x: flow.flatten(x), [((2, 4, 3, 3), F)]),
    "transpose": (lambda x: flow.transpose(x, (1, 0, 2)), [((2, 4, 6), F)]),
    "concat": (lambda a, b: flow.concat([a, b], axis=1), [((4, 2), F), ((4, 6), F)]),
    "pad": (lambda x: pad(x, [(0, 0), (1, 2), (0, 0)]), [((4, 3, 6), F)]),
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
    "layer_norm": (lambda x, g, b: layer_norm(x, g, b, axes=(-1,)), [((4, 6), F), ((6,), F), ((6,), F)]),
    "batch_norm": (lambda x, g, b, m, v: batch_norm(x, g, b, m, v, axis=1, training=True)[0],
                   [((4, 6), F), ((6,), F), ((6,), F), ((6,), F), ((6,), F)]),
    "gather": (lambda t, i: ops.embedding.gather(t, i), [((6, 4), F), ((4, 2), _ints(6))]),
    "one_hot": (lambda i: ops.nn.one_hot(i, 6), [((4, 2), _ints(6))]),
    "argmax": (lambda x: ops.reduce.argmax(x, axis=1), [((4, 6), F)]),
    # flow.ops (Keras' ops): the ops it added
    "not_equal": (lambda a, b: ew.not_equal(a, ew.maximum(a, b)), [((4, 6), F), ((4, 6), F)]),
    "greater_equal": (lambda a, b: ew.greater_equal(a, b), [((4, 6), F), ((6,), F)]),
    "floor_divide": (lambda a, b: ew.floor_divide(a, b + 1), [((4, 6), _ints(20)), ((4, 6), _ints(5))]),
    "mod": (lambda a, b: ew.mod(a, b + 1), [((4, 6), _ints(20)), ((6,), _ints(5))]),
    **{n: (lambda a, b, n=n: getattr(ew, n)(ew.greater(a, 0.0), ew.greater(b, 0.0)), [((4, 6), F), ((4, 6), F)])
       for n in ("logical_and", "logical_or", "logical_xor")},
    "logical_not": _unary(lambda a: ew.logical_not(ew.greater(a, 0.0))),
    "isnan": _unary(lambda a: ew.isnan(flow.math.log(a))),
    "isfinite": _unary(lambda a: ew.isfinite(1.0 / ew.round(a))),
    "erf": _unary(lambda a: ew.erf(a)),
    "log1p": _unary(lambda a: ew.log1p(a), POS),
    "expm1": _unary(lambda a: ew.expm1(a)),
    "sin": _unary(lambda a: ew.sin(a)),
    "cos": _unary(lambda a: ew.cos(a)),
    "floor": _unary(lambda a: ew.floor(a * 3.0)),        # rounding: a gradient of zero
    "ceil": _unary(lambda a: ew.ceil(a * 3.0)),
    "round": _unary(lambda a: ew.round(a * 3.0)),
    "sign": _unary(lambda a: ew.sign(a)),
    "stop_gradient": _unary(lambda a: ew.stop_gradient(a)),
    "fill_like": _unary(lambda a: ew.fill_like(a, 2.5)),
    "where": (lambda c, a, b: ew.where(ew.greater(c, 0.0), a, b), [((4, 6), F), ((4, 6), F), ((6,), F)]),
    "reduce_min": (lambda x: reduce.reduce_min(x, axis=1), [((4, 6), F)]),
    "reduce_prod": (lambda x: reduce.reduce_prod(x, axis=0, keepdims=True), [((4, 6), POS)]),
    "reduce_any": (lambda x: reduce.reduce_any(ew.greater(x, 1.0), axis=1), [((4, 6), F)]),
    "reduce_all": (lambda x: reduce.reduce_all(ew.greater(x, -1.0), axis=0), [((4, 6), F)]),
    "argmin": (lambda x: reduce.argmin(x, axis=0), [((4, 6), F)]),
    "slice": (lambda x: indexing.static_slice(x, (0, 1, 0), (4, 5, 2)), [((4, 6, 2), F)]),
    "take": (lambda x, i: indexing.take(x, i, 1), [((4, 6), F), ((4,), _ints(6))]),
    "take_along_axis": (lambda x, i: indexing.take_along_axis(x, i, 1), [((4, 6), F), ((4, 2), _ints(6))]),
    "cumsum": (lambda x: along_axis.cumsum(x, 1), [((4, 6), F)]),
    "cumprod": (lambda x: along_axis.cumprod(x, 0), [((4, 6), POS)]),
    "sort": (lambda x: along_axis.sort(x, 1), [((4, 6), F)]),
    "argsort": (lambda x: along_axis.argsort(x, 0), [((4, 6), F)]),
    "top_k": (lambda x: along_axis.top_k(x, 2)[0], [((4, 6), F)]),
    # the fused attention, causal, with a bias and a padding mask that hold the batch and the heads
    "dot_product_attention": (lambda q, k, v, b, m: ops.dot_product_attention(q, k, v, bias=b, mask=ew.greater(
        m, -1.0), is_causal=True), [((2, 4, 2, 6), F), ((2, 4, 2, 6), F), ((2, 4, 2, 6), F), ((2, 2, 4, 4), F),
                                    ((2, 2, 1, 4), F)]),
    # an LSTM's whole sequence from given states, a mask of 0/1 ids; a GRU (reset_after) run backwards
    "rnn_lstm": (lambda x, k, r, b, h, c, m: rnn(x, k, r, b, [h, c], m, cell="lstm", units=2,
                                                   return_sequences=True)[0],
                 [((4, 3, 5), F), ((5, 8), F), ((2, 8), F), ((8,), F), ((4, 2), F), ((4, 2), F), ((4, 3), _ints(2))]),
    "rnn_gru": (lambda x, k, r, b: rnn(x, k, r, b, cell="gru", units=2, go_backwards=True)[0],
                [((4, 3, 5), F), ((5, 6), F), ((2, 6), F), ((2, 6), F)]),
}
CONSTRAINT = "sbp_constraint"        # its signature is the SBP it pins: tried by pinning, not by forcing
MASKED_DROPOUT = (lambda a: flow.nn.dropout(a, 0.5), [((4, 6), F)])   # compared with itself, not one device
ROW_DROPOUT = (lambda a: flow.nn.dropout(a, 0.5, noise_shape=(None, 1)), [((4, 6), F)])    # a row dropped whole
FLIP = (lambda x: augment.random_flip(x, True, False, data_format="NCHW"), [((4, 2, 3, 5), F)])


def _probe(name, nd_sbp=None, case=None):
    """The op applied to placeholders: its node tells the legal signatures for these shapes."""
    fn, specs = case or CASES[name]
    xs = [placeholder(shape, flow.int32 if callable(kind) else flow.float32, f"probe{i}")
          for i, (shape, kind) in enumerate(specs)]
    if name == CONSTRAINT:
        axes = list(flow.config.mesh_shape().items()) if flow.config.view() == "consistent" else None
        return fn(*xs, nd_sbp or (axes and (broadcast,) * len(axes)))
    return fn(*xs)


class _Probe:      # what propagate.signatures reads of a node, with a signature forced
    def __init__(self, node, forced):
        self.op, self.inputs, self.name, self.attrs = node.op, node.inputs, node.name, node.attrs
        self.signature = forced


def offered(name, case=None):
    """The signatures of the case's op that the backend supports, for the case's shapes (on the mesh in force);
    a constraint's are every SBP it can pin."""
    node = _probe(name, case=case).node
    if name == CONSTRAINT:
        x = node.inputs[0]
        return [Signature((s,), (s,)) for s in [Split(k) for k in range(x.ndim)] + [broadcast, partial_sum]]
    return [s for s in signatures_of(node.outputs[0]) if supports(node.op.name, s)]


def assignments(name, mesh, case=None):
    """Per-axis signature tuples to try: each offered signature on each mesh axis, where the shapes let it."""
    use("consistent", mesh=mesh)
    node = _probe(name, case=case).node
    sigs = offered(name, case)
    axes = list(mesh.items())
    specs = [(b.shape, b.dtype) for b in node.outputs]

    def ok(forced):
        try:
            if name == CONSTRAINT:
                _probe(name, tuple(s.outputs[0] for s in forced))
            else:
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


def partial_rules(path, shape, partial_axes):
    """Layout rules of the variables of ``partial_input``: its contraction split over ``partial_axes``."""
    if len(partial_axes) > 1:
        raise AssertionError(f"{path}: a partial sum over two mesh axes needs a contraction split over both")
    rank, axis = len(shape), partial_axes[0]
    if rank == 1:
        return {f"^{re.escape(path)}/a$": (axis, None)}
    a, b = [None] * rank, [None] * rank
    a[rank - 1] = b[rank - 2] = axis
    return {f"^{re.escape(path)}/a$": tuple(a), f"^{re.escape(path)}/b$": tuple(b)}


def partial_input(path, shape, partial_axes, mesh):
    """A float input of ``shape`` made by a matmul (a sum over axis 0 if 1-D) from variables ``path/a`` and
    ``path/b``: its contraction is split over the mesh axis in ``partial_axes`` (giving P there, see
    partial_rules), whole over the others (giving B, which the planner boxes as the consumer wants)."""
    rank, init = len(shape), flow.random_normal_initializer
    if rank >= 2:
        a = flow.get_variable(f"{path}/a", shape[:-1] + (CONTRACTED,), initializer=init())
        b = flow.get_variable(f"{path}/b", shape[:-2] + (CONTRACTED, shape[-1]), initializer=init())
        y = matmul(a, b)
        split = Signature((Split(rank - 1), Split(rank - 2)), (partial_sum,))
    else:
        y = flow.math.reduce_sum(flow.get_variable(f"{path}/a", (CONTRACTED,) + shape, initializer=init()), axis=0)
        split = Signature((Split(0),), (partial_sum,))
    if mesh is not None:
        whole = Signature((broadcast,) * len(y.node.inputs), (broadcast,))
        force_signature(y, *(split if axis in partial_axes else whole for axis in mesh))
    return y


def run(name, branches, mesh=None, case=None, plan=None):
    """One SGD(1.0) step of a job with one branch per signature tuple in ``branches``, forced on ``mesh`` (on
    one device: the same graph, nothing forced); its outputs and variables.  ``plan``, a list, receives
    (forward Boxing, [(producer, op, mesh axis)] of each partial-sum input)."""
    fn, specs = case or CASES[name]
    use("mirrored" if mesh is None else "consistent", mesh=mesh, fresh=True)
    rng = np.random.default_rng(0)
    consts = [[kind(shape, rng) if callable(kind) else None for shape, kind in specs] for _ in branches]
    axes = list(mesh) if mesh else [f"axis{j}" for j in range(len(branches[0]))]
    partial = {(k, i): [a for a, s in zip(axes, forced) if s.inputs[i] == partial_sum]
               for k, forced in enumerate(branches) for i in range(len(specs))}
    rules, partial_feeds = {}, []     # partial_feeds: (producer, op, mesh axis) of each P input
    if mesh is not None:
        for k, forced in enumerate(branches):
            for i, (shape, kind) in enumerate(specs):
                if partial[k, i]:
                    rules.update(partial_rules(f"b{k}/in{i}", shape, partial[k, i]))
                elif not callable(kind):
                    rules[f"^{re.escape(f'b{k}/in{i}')}$"] = layout_spec([s.inputs[i] for s in forced], axes,
                                                                         len(shape))
    trains = any(not callable(kind) for _, kind in specs) and _probe(name, case=case).dtype.is_floating

    def inputs(k):
        xs = []
        for i, (shape, kind) in enumerate(specs):
            if callable(kind):
                xs.append(flow.constant(consts[k][i], dtype=flow.int32))
            elif partial[k, i]:
                xs.append(partial_input(f"b{k}/in{i}", shape, partial[k, i], mesh))
            else:
                xs.append(flow.get_variable(f"b{k}/in{i}", shape, initializer=FLOATS[kind]()))
        return xs

    @flow.global_function(type="train" if trains else "predict")
    def job():
        loss, outs = None, []
        for k, forced in enumerate(branches):
            xs = inputs(k)
            if name == CONSTRAINT:
                y = fn(*xs, mesh and tuple(s.outputs[0] for s in forced))
            else:
                y = fn(*xs)
                if mesh is not None:
                    force_signature(y, *forced)
            partial_feeds.extend((x.node.name, y.node.name, a) for i, x in enumerate(xs) for a in partial[k, i])
            outs.append(y)
            if y.dtype.is_floating:
                w = flow.constant(np.random.default_rng(k).normal(size=y.shape), dtype=y.dtype)
                term = flow.math.reduce_sum(y * w)
                loss = term if loss is None else loss + term
        if trains:
            flow.optimizer.SGD(flow.optimizer.PiecewiseConstantScheduler([], [1.0])).minimize(loss)
        return tuple(outs)

    flow.config.set_layout_rules(rules)
    outs = job()
    values = {p: v.numpy() for p, v in store.variables.items()}
    if plan is not None:
        plan += [[b for b in job.parallel_plan().boxing if b.phase == "forward"], partial_feeds]
    return outs, values


def check(name, mesh_name):
    mesh = MESHES[mesh_name]
    branches = assignments(name, mesh)
    sigs = offered(name)
    for pos, axis in enumerate(mesh):
        untried = [s for s in sigs if s not in {b[pos] for b in branches}]
        assert not untried, (f"{name}: offered signatures never tried on mesh axis {axis!r} of {mesh}: {untried}; "
                             f"change the case's shapes so that they divide")
    ref_outs, ref_vars = run(name, branches)
    plan = []
    outs, variables = run(name, branches, mesh, plan=plan)
    forward, partial_feeds = plan
    for producer, op, axis in partial_feeds:      # P reaches the op as P: no collective over that axis between
        moved = [b for b in forward if b.producer == producer and b.consumer == op
                 and any(a == axis for a, _ in b.collectives)]
        assert not moved, f"{name}: the partial-sum input from {producer} was boxed over {axis!r}: {moved}"
    for k, forced in enumerate(branches):
        sig = " | ".join(map(repr, forced))
        np.testing.assert_allclose(outs[k], ref_outs[k], rtol=1e-5, atol=1e-5, err_msg=f"{name} forward, {sig}")
        mine = [p for p in ref_vars if p.startswith(f"b{k}/")]
        assert mine or not any(not callable(kind) for _, kind in CASES[name][1]), ref_vars
        for path in mine:
            np.testing.assert_allclose(variables[path], ref_vars[path], rtol=1e-5, atol=1e-5,
                                       err_msg=f"{name} gradient of {path}, {sig}")


@pytest.mark.parametrize("mesh_name", sorted(MESHES))
@pytest.mark.parametrize("name", sorted(CASES))
def test_every_signature_matches_one_device(name, mesh_name):
    check(name, mesh_name)


@pytest.mark.parametrize("mesh_name", sorted(MESHES))
def test_partial_sum_inputs_are_planned_as_partial_sums(mesh_name):
    """The P signatures of matmul, add and conv2d are tried with a P input on every mesh (guards run's set-up)."""
    for name, wanted in [("matmul", {"P x B -> P", "B x P -> P"}), ("add", {"P x P -> P"}), ("conv2d", {"P x B -> P"})]:
        tried = {repr(s) for b in assignments(name, MESHES[mesh_name]) for s in b}
        assert wanted <= tried, (name, tried)


# DTensor draws a stateless random op shard by shard: on a 2x2 mesh the replicas of one shard drew different masks,
# and replicated variables drifted apart with no error.  The consistent view now draws whole and slices
# (lowering.py DTensorContext.random_uniform); the 2x2 mesh below is the case that caught it.
DROPOUT_MESHES = ["2", "2x2"]


@pytest.mark.parametrize("mesh_name", DROPOUT_MESHES)
def test_dropout_drops_and_scales_alike_forward_and_backward(mesh_name):
    """At rate 0.5 each signature's mask is its own (DESIGN.md), but every kept value is doubled, every dropped one
    is 0, and the gradient (``w`` where kept, doubled) follows the same mask."""
    mesh = MESHES[mesh_name]
    branches = assignments("dropout", mesh, MASKED_DROPOUT)
    assert {b[0] for b in branches} == set(offered("dropout", MASKED_DROPOUT))
    initial, _ = run("identity", branches)       # one device: the same variables, passed through
    outs, variables = run("dropout", branches, mesh, MASKED_DROPOUT)
    for k, forced in enumerate(branches):
        kept = outs[k] != 0
        assert 0.2 < kept.mean() < 0.8, (forced, kept)
        np.testing.assert_allclose(outs[k][kept], 2 * initial[k][kept], rtol=1e-6, err_msg=repr(forced))
        w = np.random.default_rng(k).normal(size=outs[k].shape).astype(np.float32)
        np.testing.assert_allclose(variables[f"b{k}/in0"], initial[k] - 2 * w * kept, rtol=1e-5, atol=1e-5,
                                   err_msg=repr(forced))


@pytest.mark.parametrize("mesh_name", DROPOUT_MESHES)
def test_dropout_with_a_noise_shape_drops_whole_rows_alike_forward_and_backward(mesh_name):
    """``noise_shape=(None, 1)`` (SpatialDropout's form): one draw per row, in every signature; what is dropped
    is dropped whole, forward and backward."""
    mesh = MESHES[mesh_name]
    branches = assignments("dropout", mesh, ROW_DROPOUT)
    assert {b[0] for b in branches} == set(offered("dropout", ROW_DROPOUT))
    initial, _ = run("identity", branches)
    outs, variables = run("dropout", branches, mesh, ROW_DROPOUT)
    for k, forced in enumerate(branches):
        kept = outs[k] != 0
        assert np.all(kept == kept[:, :1]), (forced, kept)
        np.testing.assert_allclose(outs[k][kept], 2 * initial[k][kept], rtol=1e-6, err_msg=repr(forced))
        w = np.random.default_rng(k).normal(size=outs[k].shape).astype(np.float32)
        np.testing.assert_allclose(variables[f"b{k}/in0"], initial[k] - 2 * w * kept, rtol=1e-5, atol=1e-5,
                                   err_msg=repr(forced))


@pytest.mark.parametrize("mesh_name", DROPOUT_MESHES)
def test_random_flip_flips_an_image_whole_or_not_forward_and_backward(mesh_name):
    """In every signature each image comes out as it is or flipped left-right, and its gradient (``w``, or ``w``
    flipped back) follows the same draw."""
    mesh = MESHES[mesh_name]
    branches = assignments("random_flip", mesh, FLIP)
    assert {b[0] for b in branches} == set(offered("random_flip", FLIP))
    initial, _ = run("identity", branches, case=(lambda a: ops.elementwise.identity(a), FLIP[1]))
    outs, variables = run("random_flip", branches, mesh, FLIP)
    for k, forced in enumerate(branches):
        flipped = np.array([not np.array_equal(o, i) for o, i in zip(outs[k], initial[k])])
        np.testing.assert_array_equal(outs[k], np.where(flipped[:, None, None, None], initial[k][..., ::-1],
                                                        initial[k]), err_msg=repr(forced))
        w = np.random.default_rng(k).normal(size=outs[k].shape).astype(np.float32)
        back = np.where(flipped[:, None, None, None], w[..., ::-1], w)
        np.testing.assert_allclose(variables[f"b{k}/in0"], initial[k] - back, rtol=1e-5, atol=1e-5,
                                   err_msg=repr(forced))


def test_forcing_a_signature_the_backend_cannot_realise_is_named():
    if declared_supports() is None:
        pytest.skip(f"backend {flow.config.backend_name()!r} realises every signature (it declares no supports)")
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
