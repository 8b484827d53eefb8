"""Every op against an independent float64 reference (numpy math written out, ``tests/numeric.py``), forward and gradient,
with the harness of tests/reference.py.  One device, mirrored view.
"""
import math

import numpy as np
import pytest
import numeric as R

import flowlayers as flow
from flowlayers.ops.conv import conv2d
from flowlayers.ops import elementwise as ew
from flowlayers.ops import nn as nn_ops
from reference import (F, F64, I, N, P, Scale, check, r_avg_pool, r_conv2d, r_log_softmax, r_max_pool, r_moments,
                       r_sigmoid, r_softmax, where)


pytestmark = pytest.mark.usefixtures("one_device")


# --------------------------------------------------------------------------- op-specific references
SELU_ALPHA, SELU_SCALE = 1.6732632423543772848170429916717, 1.0507009873554804934193349852946


def r_batch_norm(x, gamma, beta, mm, mv, axis, momentum, eps, training):
    axes = [i for i in range(x.ndim) if i != axis]
    shape = [-1 if i == axis else 1 for i in range(x.ndim)]
    if training:
        mean, var = r_moments(x, axes)
        bm, bv = R.reshape(mean, [-1]), R.reshape(var, [-1])
        new_mm, new_mv = mm * momentum + bm * (1 - momentum), mv * momentum + bv * (1 - momentum)
    else:
        mean, var = R.reshape(mm, shape), R.reshape(mv, shape)
        new_mm, new_mv = mm, mv
    y = (x - mean) / R.sqrt(var + eps) * R.reshape(gamma, shape) + R.reshape(beta, shape)
    return y, new_mm, new_mv


def r_layer_norm(x, gamma, beta, axes, eps):
    mean, var = r_moments(x, axes)
    shape = [x.shape[i] if i in axes else 1 for i in range(x.ndim)]
    return (x - mean) / R.sqrt(var + eps) * R.reshape(gamma, shape) + R.reshape(beta, shape)


# --------------------------------------------------------------------------- elementwise
def _binary_cases():
    ops = {
        "add": (flow.math.add, lambda a, b: a + b, {}),
        "subtract": (flow.math.subtract, lambda a, b: a - b, {}),
        "multiply": (flow.math.multiply, lambda a, b: a * b, {}),
        "divide": (flow.math.divide, lambda a, b: a / b, {"b": (0.5, 2.0)}),
        "maximum": (flow.math.maximum, lambda a, b: where(a >= b, a, b), {}),
        "minimum": (flow.math.minimum, lambda a, b: where(a <= b, a, b), {}),
        "pow": (flow.math.pow, lambda a, b: R.exp(b * R.math.log(a)), {"a": (0.5, 2.0)}),
    }
    layouts = {   # (a spec, b spec)
        "same": ((3, 4), (3, 4), "f"),
        "bcast_batched": ((3, 4), (1, 4), "f"),
        "bcast_param": ((3, 4), (4,), "p"),
        "bcast_param_2d": ((2, 3, 1), (3, 4), "p"),
    }
    cases = []
    for op, (fn, ref, ranges) in ops.items():
        for lay, (sa, sb, kb) in layouts.items():
            a = F(*sa, lo=ranges.get("a", (-2, 2))[0], hi=ranges.get("a", (-2, 2))[1])
            blo, bhi = ranges.get("b", (-2, 2))
            b = F(*sb, lo=blo, hi=bhi) if kb == "f" else P(*sb, lo=blo, hi=bhi)
            cases.append(pytest.param([a, b], fn, ref, id=f"{op}-{lay}"))
    return cases


@pytest.mark.parametrize("specs, fn, ref", _binary_cases())
def test_binary(specs, fn, ref):
    check(specs, fn, ref)


@pytest.mark.parametrize("build, ref, lo", [
    pytest.param(lambda x: x + 1.5, lambda x: x + 1.5, -2, id="blob+scalar"),
    pytest.param(lambda x: 2.0 - x, lambda x: 2.0 - x, -2, id="scalar-blob"),
    pytest.param(lambda x: x * 3.0, lambda x: x * 3.0, -2, id="blob*scalar"),
    pytest.param(lambda x: 1.0 / x, lambda x: 1.0 / x, 0.5, id="scalar/blob"),
    pytest.param(lambda x: -x, lambda x: -x, -2, id="neg"),
    pytest.param(lambda x: flow.math.pow(x, 3.0), lambda x: x * x * x, 0.5, id="pow-scalar"),
    pytest.param(lambda x: flow.math.maximum(x, 0.25), lambda x: where(x >= 0.25, x, 0.25), -2, id="max-scalar"),
])
def test_scalar_operands(build, ref, lo):
    check([F(3, 4, lo=lo)], build, ref)


UNARY = {   # name: (flow fn, reference, (lo, hi))
    "relu": (flow.nn.relu, lambda x: where(x > 0, x, 0.0), (-2, 2)),
    "relu6": (flow.nn.relu6, lambda x: R.clip_by_value(x, 0.0, 6.0), (-8, 8)),
    "sigmoid": (flow.math.sigmoid, r_sigmoid, (-3, 3)),
    "tanh": (flow.math.tanh, lambda x: (R.exp(2 * x) - 1) / (R.exp(2 * x) + 1), (-3, 3)),
    "exp": (flow.math.exp, R.exp, (-2, 2)),
    "log": (flow.math.log, R.math.log, (0.2, 3)),
    "sqrt": (flow.math.sqrt, lambda x: R.pow(x, 0.5), (0.2, 3)),
    "rsqrt": (flow.math.rsqrt, lambda x: R.pow(x, -0.5), (0.2, 3)),
    "square": (flow.math.square, lambda x: x * x, (-2, 2)),
    "gelu": (flow.nn.gelu, lambda x: 0.5 * x * (1 + R.math.erf(x / math.sqrt(2.0))), (-3, 3)),
    "softplus": (flow.nn.softplus, lambda x: R.math.log(1 + R.exp(x)), (-4, 4)),
    "softsign": (flow.nn.softsign, lambda x: x / (1 + R.abs(x)), (-3, 3)),
    "silu": (flow.nn.silu, lambda x: x * r_sigmoid(x), (-3, 3)),
    "swish": (flow.nn.swish, lambda x: x * r_sigmoid(x), (-3, 3)),
    "elu": (flow.nn.elu, lambda x: where(x > 0, x, R.exp(R.minimum(x, 0.0)) - 1), (-3, 3)),
    "selu": (flow.nn.selu, lambda x: SELU_SCALE * where(x > 0, x, SELU_ALPHA * (R.exp(R.minimum(x, 0.0)) - 1)),
             (-3, 3)),
    "hard_sigmoid": (flow.nn.hard_sigmoid, lambda x: R.clip_by_value(x / 6.0 + 0.5, 0.0, 1.0), (-5, 5)),
    "leaky_relu": (flow.nn.leaky_relu, lambda x: where(x > 0, x, 0.2 * x), (-2, 2)),
    "leaky_relu_0.1": (lambda x: flow.nn.leaky_relu(x, alpha=0.1), lambda x: where(x > 0, x, 0.1 * x), (-2, 2)),
    "negative": (flow.math.negative, lambda x: -x, (-2, 2)),
    "abs": (flow.math.abs, lambda x: where(x >= 0, x, -x), (-2, 2)),
    "identity": (ew.identity, lambda x: x, (-2, 2)),
}


@pytest.mark.parametrize("name", list(UNARY))
def test_unary(name):
    fn, ref, (lo, hi) = UNARY[name]
    check([F(3, 4, lo=lo, hi=hi)], fn, ref)


# TensorFlow's slope at an exact 0, where a function has a kink: both engines take it (a relu before them makes
# exact zeros common, and the engines' own rules may take the other side: JAX's abs 1, selu the negative side's)
SLOPES_AT_ZERO = {"relu": (flow.nn.relu, 0.0), "abs": (flow.math.abs, 0.0), "selu": (flow.nn.selu, SELU_SCALE),
                  "elu": (flow.nn.elu, 1.0), "leaky_relu": (flow.nn.leaky_relu, 0.2)}


@pytest.mark.parametrize("name", sorted(SLOPES_AT_ZERO))
def test_slope_at_an_exact_zero_is_tensorflows(name):
    """A Dense with zero weights feeds exact zeros to the function; one SGD(1.0) step on the mean squared distance to -1
    (the function is 0 at 0) moves each bias by minus 2 rows x 2 x 1 / 6 elements x the slope."""
    fn, slope = SLOPES_AT_ZERO[name]
    flow.clear_session()
    x = flow.Input((3,))
    model = flow.Model(x, fn(flow.layers.Dense(3, kernel_initializer="zeros", bias_initializer="zeros")(x)))
    model.compile(flow.optimizers.SGD(1.0), flow.losses.MeanSquaredError())
    model.fit(np.ones((2, 3), np.float32), -np.ones((2, 3), np.float32), batch_size=2, verbose=0)
    np.testing.assert_allclose(model.get_weights()[1], np.full(3, -2 / 3 * slope), rtol=1e-6, atol=1e-7)


@pytest.mark.parametrize("name", ["relu", "gelu", "hard_sigmoid", "softsign", "selu", "exponential"])
def test_activations_by_name(name):
    fn = flow.activations.get(name)
    ref = R.exp if name == "exponential" else UNARY[name][1]
    check([F(5, lo=-4, hi=4)], fn, ref, grad=False)


def test_unary_integer_abs_negative():
    x = np.array([[3, -2, 0], [-7, 5, 1]], np.int32)
    check([I(3, high=1, values=x)], lambda t: flow.math.abs(flow.math.negative(t)), lambda t: R.abs(-t),
          grad=False)


@pytest.mark.parametrize("dtype, grad", [(flow.float64, True), (flow.int32, False), (flow.int64, False)])
def test_cast_from_float(dtype, grad):
    np_dtype = dtype.numpy
    got = check([F(3, 4, lo=-5, hi=5)], lambda x: flow.cast(x, dtype),
                lambda x: R.cast(x, R.as_dtype(np_dtype)) if grad else
                R.constant(np.trunc(np.asarray(x)).astype(np_dtype)), grad=grad)
    assert got[0].dtype == np_dtype


def test_cast_from_int():
    check([I(5, high=100), F(5)], lambda i, x: flow.cast(i, flow.float32) * x,
          lambda i, x: R.cast(i, F64) * x)


def test_constant():
    value = np.arange(12, dtype=np.float32).reshape(3, 4) / 7.0
    check([F(3, 4)], lambda x: x * flow.constant(value), lambda x: x * value.astype(np.float64))


@pytest.mark.parametrize("dtype", [flow.float32, flow.float64])
def test_one_hot(dtype):
    got = check([I(3, high=5)], lambda i: nn_ops.one_hot(i, 5, dtype),
                lambda i: R.constant(np.eye(5, dtype=dtype.numpy)[np.asarray(i)]), grad=False)
    assert got[0].dtype == dtype.numpy


TIES_A = [[[1., 2., 3., 4.], [0., -1., 5., 5.], [2., 2., 2., 2.]], [[7., 1., 0., 3.], [3., 3., 3., 3.], [1., 0., 1., 0.]]]
TIES_B = [[[1., 3., 2., 4.], [0., 1., 5., 4.], [2., 1., 3., 2.]], [[7., 1., 1., 2.], [3., 4., 2., 3.], [0., 0., 1., 1.]]]


def test_compare_ops():
    """Operands equal in some places and ordered either way in others: ``>`` and ``>=``, ``==`` and ``<=`` differ."""
    got = check([F(3, 4, values=TIES_A), F(3, 4, values=TIES_B)],
                lambda a, b: [flow.math.greater(a, b), flow.math.equal(a, b), flow.math.greater(b, a)],
                lambda a, b: (a > b, a == b, b > a), grad=False)
    assert all(g.dtype == np.bool_ for g in got)
    assert all(0 < g.sum() < g.size for g in got)           # neither all True nor all False


@pytest.mark.parametrize("specs, build, ref", [
    pytest.param([F(3, 4), P(4)], flow.math.greater, lambda a, b: a > b, id="bcast-param"),
    pytest.param([F(3, 4)], lambda a: flow.math.greater(a, 0.5), lambda a: a > 0.5, id="blob-scalar"),
    pytest.param([F(3, 4)], lambda a: flow.math.greater(0.5, a), lambda a: 0.5 > a, id="scalar-blob"),
])
def test_greater_broadcasts(specs, build, ref):
    check(specs, build, ref, grad=False)


# --------------------------------------------------------------------------- matmul
@pytest.mark.parametrize("specs, kw, ref", [
    pytest.param([F(3), P(3, 5)], {}, lambda a, b: R.einsum("nk,kc->nc", a, b), id="2d"),
    pytest.param([F(3), P(5, 3)], {"transpose_b": True}, lambda a, b: R.einsum("nk,ck->nc", a, b), id="2d-tb"),
    pytest.param([F(4, 3), F(3, 5)], {}, lambda a, b: R.einsum("nrk,nkc->nrc", a, b), id="batched"),
    pytest.param([F(3, 4), F(3, 5)], {"transpose_a": True}, lambda a, b: R.einsum("nkr,nkc->nrc", a, b),
                 id="batched-ta"),
    pytest.param([F(4, 3), F(5, 3)], {"transpose_b": True}, lambda a, b: R.einsum("nrk,nck->nrc", a, b),
                 id="batched-tb"),
    pytest.param([F(3, 4), F(5, 3)], {"transpose_a": True, "transpose_b": True},
                 lambda a, b: R.einsum("nkr,nck->nrc", a, b), id="batched-ta-tb"),
    pytest.param([F(4, 3), P(3, 5)], {}, lambda a, b: R.einsum("nrk,kc->nrc", a, b), id="rank3@rank2"),
    pytest.param([F(2, 4, 3), F(2, 3, 5)], {}, lambda a, b: R.einsum("nmrk,nmkc->nmrc", a, b), id="rank4"),
])
def test_matmul(specs, kw, ref):
    check(specs, lambda a, b: flow.matmul(a, b, **kw), ref)


def test_matmul_operator():
    check([F(3), P(3, 2)], lambda a, b: a @ b, lambda a, b: R.einsum("nk,kc->nc", a, b))


def r_einsum(equation):
    """einsum by broadcasting: every operand laid out over all letters, multiplied, the summed letters reduced
    (no R.einsum, which is the kernel under test)."""
    left, out = equation.split("->")
    terms = left.split(",")
    letters = sorted(set("".join(terms)))

    def spread(x, term):
        order = [term.index(c) for c in letters if c in term]
        x = R.transpose(x, order)
        shape = [R.shape(x)[[c for c in letters if c in term].index(c)] if c in term else 1 for c in letters]
        return R.reshape(x, shape)

    def ref(*xs):
        product = spread(xs[0], terms[0])
        for x, term in zip(xs[1:], terms[1:]):
            product = product * spread(x, term)
        summed = R.reduce_sum(product, axis=[i for i, c in enumerate(letters) if c not in out])
        kept = [c for c in letters if c in out]
        return R.transpose(summed, [kept.index(c) for c in out])
    return ref


@pytest.mark.parametrize("equation, specs", [
    ("bqd,dhk->bqhk", [F(4, 6), P(6, 2, 3)]),          # attention's projections, Keras' variable shapes
    ("bqhk,bvhk->bhqv", [F(4, 2, 3), F(5, 2, 3)]),     # attention scores
    ("bhqv,bvhk->bqhk", [F(2, 4, 5), F(5, 2, 3)]),     # attention's weighted values
    ("bqhk,hkd->bqd", [F(4, 2, 3), P(2, 3, 6)]),       # the output projection
    ("abc->ac", [F(6, 2)]),
    ("ab,cb->ac", [F(3), P(5, 3)]),
])
def test_einsum(equation, specs):
    check(specs, lambda *xs: flow.einsum(equation, *xs), r_einsum(equation))


@pytest.mark.parametrize("equation, shapes, message", [
    ("ab,bc", [(2, 3), (3, 4)], r"expected 'subscripts,subscripts->subscripts' of letters \(explicit '->'"),
    ("...b,bc->...c", [(2, 3), (3, 4)], "no ellipsis"),
    ("ab,bc->ac", [(2, 3)], r"expected one or two operands, as many as the equation's terms \(2\), received 1"),
    ("aab->b", [(2, 2, 3)], r"expected each letter at most once per term \(no diagonals\), received 'aab'"),
    ("ab,bc->ad", [(2, 3), (3, 4)], r"expected the output's letters among the operands', received \['d'\]"),
    ("ab,bc->ac", [(2, 3), (4, 4)], r"letter 'b' expected one size, received 3 and 4"),
    ("abc,bc->a", [(2, 3), (3, 4)], r"operand 'abc' expected rank 3, received shape \(2, 3\)"),
])
def test_einsum_mistakes_are_named(equation, shapes, message):
    from flowlayers.ops.source import placeholder

    xs = [placeholder(s, flow.float32, f"x{i}") for i, s in enumerate(shapes)]
    with pytest.raises(flow.ShapeError, match=f"einsum .*{message}"):
        flow.einsum(equation, *xs)


# --------------------------------------------------------------------------- convolution and pooling
CONV_CASES = [   # (H, W, Cin, kernel (kh, kw, Cout), strides, padding, dilations)
    ((7, 7), 3, (3, 3, 4), 1, "VALID", 1),
    ((7, 7), 3, (3, 3, 4), 1, "SAME", 1),
    ((7, 7), 3, (3, 3, 4), 2, "VALID", 1),
    ((7, 7), 3, (3, 3, 4), 2, "SAME", 1),
    ((6, 7), 2, (2, 2, 3), (1, 2), "SAME", 1),
    ((7, 8), 2, (3, 2, 3), (2, 1), "VALID", 1),
    ((7, 7), 2, (3, 3, 2), 1, "SAME", 2),
    ((8, 9), 2, (2, 3, 2), 2, "SAME", 2),
    ((9, 9), 2, (3, 3, 2), (2, 1), "VALID", 2),
]


def _conv_params(cases=CONV_CASES):
    out = []
    for (hw, cin, k, s, pad, d) in cases:
        for fmt in ("NCHW", "NHWC"):
            name = f"{fmt}-{hw[0]}x{hw[1]}-k{k[0]}{k[1]}-s{s}-{pad}-d{d}"
            out.append(pytest.param(fmt, hw, cin, k, s, pad, d, id=name))
    return out


@pytest.mark.parametrize("fmt, hw, cin, k, s, pad, d", _conv_params())
def test_conv2d(fmt, hw, cin, k, s, pad, d):
    x_shape = (cin, *hw) if fmt == "NCHW" else (*hw, cin)
    pair = (s, s) if isinstance(s, int) else s
    check([F(*x_shape), P(k[0], k[1], cin, k[2], lo=-0.5, hi=0.5)],
          lambda x, w: conv2d(x, w, strides=s, padding=pad, data_format=fmt, dilations=d),
          lambda x, w: r_conv2d(x, w, pair, pad, fmt, (d, d)))


# OneFlow's filter layouts and their permutation to the reference's (kh, kw, in, out)
ONEFLOW_FILTERS = {"NCHW": (lambda kh, kw, cin, cout: (cout, cin, kh, kw), (2, 3, 1, 0)),
                   "NHWC": (lambda kh, kw, cin, cout: (cout, kh, kw, cin), (1, 2, 3, 0))}


@pytest.mark.parametrize("fmt, hw, cin, k, s, pad, d", _conv_params([CONV_CASES[i] for i in (0, 4, 8)]))
def test_nn_conv2d_oneflow_filters(fmt, hw, cin, k, s, pad, d):
    """``flow.nn.conv2d`` takes OneFlow's filter layout: (out, in, kh, kw) for NCHW, (out, kh, kw, in) for NHWC."""
    x_shape = (cin, *hw) if fmt == "NCHW" else (*hw, cin)
    pair = (s, s) if isinstance(s, int) else s
    filters_shape, perm = ONEFLOW_FILTERS[fmt]
    check([F(*x_shape), P(*filters_shape(*k[:2], cin, k[2]), lo=-0.5, hi=0.5)],
          lambda x, w: flow.nn.conv2d(x, w, s, pad, data_format=fmt, dilations=None if d == 1 else d),
          lambda x, w: r_conv2d(x, R.transpose(w, perm), pair, pad, fmt, (d, d)))


POOL_CASES = [   # (H, W), ksize, strides, padding
    ((6, 6), 2, None, "VALID"),
    ((7, 7), 2, 2, "SAME"),
    ((7, 7), 3, 2, "VALID"),
    ((7, 7), 3, 2, "SAME"),
    ((5, 6), (2, 3), (1, 2), "SAME"),
]


def _pool_params():
    out = []
    for kind in ("max", "avg"):
        for (hw, k, s, pad) in POOL_CASES:
            for fmt in ("NCHW", "NHWC"):
                out.append(pytest.param(kind, fmt, hw, k, s, pad, id=f"{kind}-{fmt}-{hw[0]}x{hw[1]}-k{k}-s{s}-{pad}"))
    return out


@pytest.mark.parametrize("kind, fmt, hw, k, s, pad", _pool_params())
def test_pool2d(kind, fmt, hw, k, s, pad):
    fn = flow.nn.max_pool2d if kind == "max" else flow.nn.avg_pool2d
    r = r_max_pool if kind == "max" else r_avg_pool
    kp = (k, k) if isinstance(k, int) else k
    sp = kp if s is None else ((s, s) if isinstance(s, int) else s)
    x_shape = (3, *hw) if fmt == "NCHW" else (*hw, 3)
    check([F(*x_shape)], lambda x: fn(x, k, s, pad, fmt), lambda x: r(x, kp, sp, pad, fmt))


@pytest.mark.parametrize("shape, axis", [((4,), -1), ((3, 4), 1), ((3, 4, 5), 1), ((4, 5, 3), 3), ((4, 5, 3), -1)])
def test_bias_add(shape, axis):
    full = (N,) + shape
    c = full[axis]
    bshape = [1] * len(full)
    bshape[axis] = -1
    check([F(*shape), P(c)], lambda x, b: flow.nn.bias_add(x, b, axis=axis),
          lambda x, b: x + R.reshape(b, bshape))


# --------------------------------------------------------------------------- shape ops
@pytest.mark.parametrize("shape, build, ref, grad", [
    pytest.param((3, 4), lambda x: flow.reshape(x, (None, 12)), lambda x: R.reshape(x, (N, 12)), True, id="reshape"),
    pytest.param((3, 4), lambda x: flow.reshape(x, (-1, 2, 6)), lambda x: R.reshape(x, (N, 2, 6)), True,
                 id="reshape-neg1-first"),
    pytest.param((3, 4), lambda x: flow.reshape(x, (x.shape[0], -1, 2)), lambda x: R.reshape(x, (N, 6, 2)), True,
                 id="reshape-neg1-mid"),
    pytest.param((2, 3, 4), lambda x: flow.flatten(x), lambda x: R.reshape(x, (N, 24)), True, id="flatten"),
    pytest.param((3, 4), lambda x: flow.transpose(x, (0, 2, 1)), lambda x: R.transpose(x, (0, 2, 1)), True,
                 id="transpose"),
    pytest.param((2, 3, 4), lambda x: flow.transpose(x, (0, 3, 1, 2)), lambda x: R.transpose(x, (0, 3, 1, 2)), True,
                 id="transpose-nhwc-nchw"),
    pytest.param((2, 3, 4), lambda x: flow.transpose(x, (1, 0, 3, 2)), lambda x: R.transpose(x, (1, 0, 3, 2)), False,
                 id="transpose-batch-axis"),   # fit needs batch-major outputs: forward only
])
def test_shape_ops(shape, build, ref, grad):
    check([F(*shape)], build, ref, grad=grad)


@pytest.mark.parametrize("specs, axis", [
    pytest.param([F(3, 4), F(3, 2)], -1, id="last"),
    pytest.param([F(3, 4), F(1, 4), F(2, 4)], 1, id="three-axis1"),
    pytest.param([F(3, 4), F(3, 4)], 0, id="batch-axis"),
])
def test_concat(specs, axis):
    check(specs, lambda *xs: flow.concat(list(xs), axis=axis), lambda *xs: R.concat(xs, axis=axis),
          grad=axis != 0)   # fit needs batch-major outputs


# --------------------------------------------------------------------------- reductions
REDUCE = {"sum": (flow.math.reduce_sum, R.reduce_sum), "mean": (flow.math.reduce_mean, R.reduce_mean),
          "max": (flow.math.reduce_max, R.reduce_max)}


@pytest.mark.parametrize("kind", list(REDUCE))
@pytest.mark.parametrize("axis, keepdims", [(1, False), (-1, False), ((1, 2), False), ((1, 2), True), (2, True),
                                            (0, True), (None, True)])
def test_reduce(kind, axis, keepdims):
    fn, ref = REDUCE[kind]
    check([F(3, 4)], lambda x: fn(x, axis=axis, keepdims=keepdims),
          lambda x: ref(x, axis=axis, keepdims=keepdims),
          grad=axis not in (0, None))   # fit needs batch-major outputs: forward only over the batch axis


@pytest.mark.parametrize("kind", list(REDUCE))
def test_reduce_all_to_scalar(kind):
    fn, ref = REDUCE[kind]
    got = check([F(3, 4)], fn, ref, grad=False)   # one batch: predict gives the scalar itself, as Keras does
    assert got[0].shape == ()


@pytest.mark.parametrize("axis", [1, -1, 0])
def test_argmax(axis):
    got = check([F(3, 4)], lambda x: flow.math.argmax(x, axis=axis), lambda x: R.argmax(x, axis=axis), grad=False)
    assert got[0].dtype == np.int64


# --------------------------------------------------------------------------- softmax and cross-entropies
@pytest.mark.parametrize("shape, axis", [((5,), -1), ((3, 4), -1), ((3, 4), 1)])
@pytest.mark.parametrize("log", [False, True])
def test_softmax(shape, axis, log):
    fn = flow.nn.log_softmax if log else flow.nn.softmax
    ref = r_log_softmax if log else r_softmax
    check([F(*shape, lo=-3, hi=3)], lambda x: fn(x, axis=axis), lambda x: ref(x, axis))


@pytest.mark.parametrize("shape, dtype", [((), np.int32), ((), np.int64), ((3,), np.int32)])
def test_sparse_softmax_cross_entropy(shape, dtype):
    c = 5
    check([I(*shape, high=c, dtype=dtype), F(*shape, c, lo=-3, hi=3)],
          lambda y, z: flow.nn.sparse_softmax_cross_entropy_with_logits(y, z),
          lambda y, z: -R.reduce_sum(R.one_hot(y, c, dtype=F64) * r_log_softmax(z), -1))


def test_softmax_cross_entropy_soft_labels():
    # labels must be distributions: TF's gradient for the logits is softmax - labels, as for any sum-to-one labels
    raw = np.random.default_rng(3).uniform(0, 1, (N, 3, 5))
    labels = raw / raw.sum(-1, keepdims=True)
    check([F(3, 5, values=labels), F(3, 5, lo=-3, hi=3)],
          lambda y, z: flow.nn.softmax_cross_entropy_with_logits(y, z),
          lambda y, z: -R.reduce_sum(y * r_log_softmax(z), -1))


def test_sigmoid_cross_entropy():
    check([F(3, 4, lo=0, hi=1), F(3, 4, lo=-4, hi=4)],
          lambda y, z: flow.nn.sigmoid_cross_entropy_with_logits(y, z),
          lambda y, z: -(y * R.math.log(r_sigmoid(z)) + (1 - y) * R.math.log(1 - r_sigmoid(z))))


# --------------------------------------------------------------------------- dropout
def test_dropout_inference_is_identity():
    check([F(3, 4)], lambda x: flow.nn.dropout(x, 0.5, training=False), lambda x: x)


def test_dropout_follows_phase_in_predict():
    check([F(3, 4)], lambda x: flow.nn.dropout(x, 0.5, training=None), lambda x: x, grad=False)


@pytest.mark.parametrize("rate", [0.2, 0.5])
def test_dropout_training(rate):
    x = flow.Input((40, 50))
    model = flow.Model(x, flow.nn.dropout(x, rate, training=True))
    xv = np.random.default_rng(1).uniform(1.0, 2.0, (N, 40, 50)).astype(np.float32)
    y = model.predict(xv, batch_size=N, verbose=0)
    zero = y == 0
    assert abs(zero.mean() - rate) < 0.03, zero.mean()
    np.testing.assert_allclose(y[~zero], xv[~zero] / (1 - rate), rtol=1e-6)
    # the mask is a function of (seed, op, step): a rerun repeats it
    np.testing.assert_array_equal(model.predict(xv, batch_size=N, verbose=0), y)


@pytest.mark.parametrize("training", [True, None])
def test_dropout_gradient(training):
    """Train step, one example: each Scale gradient is 0 (dropped) or the kept value's gradient, with 1/(1-rate)."""
    rate = 0.4
    x = flow.Input((40, 50))
    scale = Scale()
    model = flow.Model(x, flow.nn.dropout(scale(x), rate, training=training))
    xv = np.random.default_rng(2).uniform(1.0, 2.0, (1, 40, 50)).astype(np.float32)
    model.compile(optimizer=flow.optimizers.SGD(1.0), loss=flow.losses.MeanSquaredError())
    model.fit(xv, np.zeros_like(xv), batch_size=1, epochs=1, shuffle=False, verbose=0)
    g = 1.0 - scale.w.numpy()
    kept = 2.0 * (xv[0] / (1 - rate)) ** 2 / xv.size      # d/ds mean((x s / (1-rate))^2) at s = 1
    dropped = g == 0
    assert abs(dropped.mean() - rate) < 0.04, dropped.mean()
    np.testing.assert_allclose(g[~dropped], kept[~dropped], rtol=1e-4, atol=1e-7)


# --------------------------------------------------------------------------- normalisation
BN_CASES = [   # per-example shape, axis
    ((4,), -1), ((3, 4, 4), 1), ((4, 4, 3), 3),
]


@pytest.mark.parametrize("shape, axis", BN_CASES)
@pytest.mark.parametrize("training", [True, False])
def test_batch_norm(shape, axis, training):
    c = ((N,) + shape)[axis]
    ax = axis % (len(shape) + 1)
    specs = [F(*shape, lo=-2, hi=3), P(c, lo=0.5, hi=1.5), P(c), P(c), P(c, lo=0.5, hi=1.5)]
    check(specs, lambda x, g, b, m, v: flow.nn.batch_norm(x, g, b, m, v, axis, 0.9, 1e-3, training),
          lambda x, g, b, m, v: r_batch_norm(x, g, b, m, v, ax, 0.9, 1e-3, training), rtol=1e-4)


def test_batch_norm_follows_phase():
    """training=None: moving statistics in predict, batch statistics in the train step."""
    specs = [F(4, lo=-2, hi=3), P(4, lo=0.5, hi=1.5), P(4), P(4), P(4, lo=0.5, hi=1.5)]
    check(specs, lambda x, g, b, m, v: flow.nn.batch_norm(x, g, b, m, v, -1, 0.9, 1e-3, None)[0],
          lambda x, g, b, m, v: r_batch_norm(x, g, b, m, v, 1, 0.9, 1e-3, False)[0],
          ref_train=lambda x, g, b, m, v: r_batch_norm(x, g, b, m, v, 1, 0.9, 1e-3, True)[0], rtol=1e-4)


@pytest.mark.parametrize("shape, axes", [((6,), (-1,)), ((3, 4), (-1,)), ((3, 4), (1, 2)), ((3, 4), (1,))])
def test_layer_norm(shape, axes):
    full = (N,) + shape
    axes_pos = tuple(sorted(a % len(full) for a in axes))
    pshape = tuple(full[a] for a in axes_pos)
    check([F(*shape, lo=-2, hi=3), P(*pshape, lo=0.5, hi=1.5), P(*pshape)],
          lambda x, g, b: flow.nn.layer_norm(x, g, b, axes, 1e-3),
          lambda x, g, b: r_layer_norm(x, g, b, list(axes_pos), 1e-3), rtol=1e-4)


# --------------------------------------------------------------------------- gather
@pytest.mark.parametrize("ids, dtype", [
    pytest.param([[0, 5, 2, 2], [5, 1, 0, 3]], np.int32, id="2d-dup-int32"),
    pytest.param([1, 4], np.int64, id="1d-int64"),
])
def test_gather(ids, dtype):
    ids = np.asarray(ids, dtype)
    check([I(*ids.shape[1:], high=6, dtype=dtype, values=ids), P(6, 3)],
          lambda i, t: flow.gather(t, i),
          lambda i, t: R.einsum("...r,rd->...d", R.one_hot(i, 6, dtype=F64), t))
