"""Every layer against an independent float64 reference (numpy math written out, ``tests/numeric.py``), forward and gradient, with the
harness of tests/reference.py.

Each layer's weights are set to random values and the reference receives them by short name
(``w["kernel"]``); after the ``fit`` step every trainable weight (the layer's and the inputs' scales)
must have moved by minus the mean-loss gradient, and non-trainable weights (BatchNormalization's moving
statistics) as the reference says.  One device, mirrored view.
"""
import functools

import numpy as np
import pytest
import numeric as R

import flowlayers as flow
import reference
from reference import (F, F64, I, N, Scale, bcast, r_avg_pool, r_conv2d, r_gelu, r_max_pool, r_moments, r_relu,
                       r_sigmoid, r_softmax)

L = flow.layers
check = functools.partial(reference.check, layer_weights=True)


pytestmark = pytest.mark.usefixtures("one_device")


# --------------------------------------------------------------------------- Dense
@pytest.mark.parametrize("shape, kwargs, act", [
    pytest.param((3,), {}, lambda y: y, id="linear"),
    pytest.param((3,), {"activation": "tanh"}, lambda y: (R.exp(2 * y) - 1) / (R.exp(2 * y) + 1), id="tanh"),
    pytest.param((3,), {"activation": "relu"}, r_relu, id="relu"),
    pytest.param((2, 5), {}, lambda y: y, id="rank3"),
    pytest.param((2, 5), {"use_bias": False, "activation": flow.nn.sigmoid}, r_sigmoid, id="rank3-nobias-callable"),
])
def test_dense(shape, kwargs, act):
    use_bias = kwargs.get("use_bias", True)
    check([F(*shape)], lambda x: L.Dense(4, **kwargs)(x),
          lambda x, w: act(R.einsum("...k,ku->...u", x, w["kernel"]) + (w["bias"] if use_bias else 0.0)))


def test_dense_functional():
    check([F(3)], lambda x: L.dense(x, 4, activation="relu", name="dense1"),
          lambda x, w: r_relu(R.einsum("nk,ku->nu", x, w["kernel"]) + w["bias"]))


# --------------------------------------------------------------------------- Conv2D
CONV = [   # (H, W), Cin, filters, kernel_size, strides, padding, dilation, use_bias, activation
    ((6, 6), 3, 4, 3, 1, "valid", 1, True, None),
    ((7, 7), 3, 4, 3, 2, "same", 1, True, "relu"),
    ((7, 6), 2, 3, (2, 3), (2, 1), "valid", 1, False, None),
    ((6, 7), 2, 3, 2, 1, "same", 1, True, None),
    ((7, 7), 2, 2, 3, 1, "same", 2, True, None),
    ((8, 9), 2, 2, 3, 2, "same", 2, True, None),
]


def _conv_params():
    out = []
    for hw, cin, f, k, s, pad, d, bias, act in CONV:
        for fmt in ("channels_last", "channels_first"):
            out.append(pytest.param(fmt, hw, cin, f, k, s, pad, d, bias, act,
                                    id=f"{fmt}-k{k}-s{s}-{pad}-d{d}-{'bias' if bias else 'nobias'}-{act}"))
    return out


@pytest.mark.parametrize("fmt, hw, cin, f, k, s, pad, d, bias, act", _conv_params())
def test_conv2d(fmt, hw, cin, f, k, s, pad, d, bias, act):
    nchw = fmt == "channels_first"
    x_shape = (cin, *hw) if nchw else (*hw, cin)
    pair = lambda v: (v, v) if isinstance(v, int) else v  # noqa: E731

    def ref(x, w):
        y = r_conv2d(x, w["kernel"], pair(s), pad.upper(), "NCHW" if nchw else "NHWC", pair(d))
        if bias:
            y = y + bcast(w["bias"], 1 if nchw else 3, 4)
        return r_relu(y) if act == "relu" else y

    check([F(*x_shape)], lambda x: L.Conv2D(f, k, strides=s, padding=pad, data_format=fmt, dilation_rate=d,
                                            use_bias=bias, activation=act)(x), ref)


def test_conv2d_functional_nchw_default():
    check([F(2, 5, 5)], lambda x: L.conv2d(x, 3, kernel_size=3, padding="SAME", name="conv1"),
          lambda x, w: r_conv2d(x, w["kernel"], (1, 1), "SAME", "NCHW") + bcast(w["bias"], 1, 4))


# --------------------------------------------------------------------------- pooling
POOL = [   # (H, W), pool_size, strides, padding
    ((6, 6), 2, None, "valid"),
    ((7, 7), 3, 2, "same"),
    ((7, 7), 3, 2, "valid"),
    ((5, 6), (2, 3), (1, 2), "same"),
]


def _pool_params():
    out = []
    for cls in ("MaxPool2D", "AveragePooling2D"):
        for hw, k, s, pad in POOL:
            for fmt in ("channels_last", "channels_first"):
                out.append(pytest.param(cls, fmt, hw, k, s, pad, id=f"{cls}-{fmt}-k{k}-s{s}-{pad}"))
    return out


@pytest.mark.parametrize("cls, fmt, hw, k, s, pad", _pool_params())
def test_pooling(cls, fmt, hw, k, s, pad):
    nchw = fmt == "channels_first"
    kp = (k, k) if isinstance(k, int) else k
    sp = kp if s is None else ((s, s) if isinstance(s, int) else s)
    r = r_max_pool if cls == "MaxPool2D" else r_avg_pool
    check([F(*((3, *hw) if nchw else (*hw, 3)))],
          lambda x: getattr(L, cls)(k, strides=s, padding=pad, data_format=fmt)(x),
          lambda x, w: r(x, kp, sp, pad.upper(), "NCHW" if nchw else "NHWC"))


# --------------------------------------------------------------------------- reshaping
@pytest.mark.parametrize("shape, make, ref", [
    pytest.param((2, 3, 4), lambda: L.Flatten(), lambda x: R.reshape(x, (N, 24)), id="Flatten"),
    pytest.param((5,), lambda: L.Flatten(), lambda x: x, id="Flatten-rank2"),
    pytest.param((2, 3, 4), lambda: L.Reshape((4, 6)), lambda x: R.reshape(x, (N, 4, 6)), id="Reshape"),
    pytest.param((2, 3, 4), lambda: L.Reshape((-1, 2)), lambda x: R.reshape(x, (N, 12, 2)), id="Reshape-neg1"),
])
def test_reshaping(shape, make, ref):
    check([F(*shape)], lambda x: make()(x), lambda x, w: ref(x))


# --------------------------------------------------------------------------- activations
@pytest.mark.parametrize("make, ref", [
    pytest.param(lambda: L.Activation("gelu"), r_gelu, id="Activation-gelu"),
    pytest.param(lambda: L.Activation("softmax"), r_softmax, id="Activation-softmax"),
    pytest.param(lambda: L.Activation(flow.nn.tanh), R.tanh, id="Activation-callable"),
    pytest.param(lambda: L.Activation("linear"), lambda x: x, id="Activation-linear"),
    pytest.param(lambda: L.ReLU(), r_relu, id="ReLU"),
    pytest.param(lambda: L.Softmax(), r_softmax, id="Softmax"),
    pytest.param(lambda: L.Softmax(axis=1), lambda x: r_softmax(x, 1), id="Softmax-axis1"),
])
def test_activation_layers(make, ref):
    check([F(3, 4, lo=-3, hi=3)], lambda x: make()(x), lambda x, w: ref(x))


# --------------------------------------------------------------------------- merging
def test_add_two():
    check([F(3, 4), F(3, 4)], lambda a, b: L.Add()([a, b]), lambda a, b, w: a + b)


def test_add_three():
    check([F(4), F(4), F(4)], lambda a, b, c: L.Add()([a, b, c]), lambda a, b, c, w: a + b + c)


@pytest.mark.parametrize("axis, shapes", [(-1, [(3, 4), (3, 2)]), (1, [(3, 4), (1, 4), (2, 4)])])
def test_concatenate(axis, shapes):
    check([F(*s) for s in shapes], lambda *xs: L.Concatenate(axis=axis)(list(xs)),
          lambda *args: R.concat(args[:-1], axis=axis))


# --------------------------------------------------------------------------- Embedding
@pytest.mark.parametrize("shape", [(4,), (2, 3)])
def test_embedding(shape):
    check([I(*shape, high=6)], lambda ids: L.Embedding(6, 3)(ids),
          lambda ids, w: R.einsum("...r,rd->...d", R.one_hot(ids, 6, dtype=F64), w["embeddings"]), batch=3)


def test_embedding_into_dense():
    check([I(4, high=5), F(4, 3)], lambda ids, x: L.Dense(2)(L.Add()([L.Embedding(5, 3)(ids), x])),
          lambda ids, x, w: R.einsum("nrd,du->nru", R.gather(w["embeddings"], ids) + x, w["kernel"]) + w["bias"])


# --------------------------------------------------------------------------- Dropout
def test_dropout_layer_predict_is_identity():
    check([F(3, 4)], lambda x: L.Dropout(0.5)(x), lambda x, w: x, grad=False)


def test_dropout_layer_training_true():
    rate = 0.3
    x = flow.Input((40, 50))
    model = flow.Model(x, L.Dropout(rate)(x, training=True))
    xv = np.random.default_rng(1).uniform(1.0, 2.0, (N, 40, 50)).astype(np.float32)
    y = model.predict(xv, batch_size=N, verbose=0)
    zero = y == 0
    assert abs(zero.mean() - rate) < 0.03, zero.mean()
    np.testing.assert_allclose(y[~zero], xv[~zero] / (1 - rate), rtol=1e-6)


def test_dropout_layer_fit():
    """fit drops (training=None follows the phase): with one example each Scale gradient is 0 or the kept one."""
    rate = 0.5
    x = flow.Input((40, 50))
    scale = Scale()
    model = flow.Model(x, L.Dropout(rate)(scale(x)))
    xv = np.random.default_rng(2).uniform(1.0, 2.0, (1, 40, 50)).astype(np.float32)
    model.compile(optimizer=flow.optimizers.SGD(1.0), loss=flow.losses.MeanSquaredError())
    model.fit(xv, np.zeros_like(xv), batch_size=1, epochs=1, shuffle=False, verbose=0)
    g = 1.0 - scale.w.numpy()
    kept = 2.0 * (xv[0] / (1 - rate)) ** 2 / xv.size
    dropped = g == 0
    assert abs(dropped.mean() - rate) < 0.04, dropped.mean()
    np.testing.assert_allclose(g[~dropped], kept[~dropped], rtol=1e-4, atol=1e-7)
    np.testing.assert_allclose(model.predict(xv, verbose=0), xv * scale.w.numpy(), rtol=1e-6)  # predict keeps all


# --------------------------------------------------------------------------- BatchNormalization
def _bn_refs(axis, rank, momentum, eps, center=True, scale=True):
    axes = [i for i in range(rank) if i != axis]

    def norm(x, w, mean, var):
        y = (x - mean) / R.sqrt(var + eps)
        if scale:
            y = y * bcast(w["gamma"], axis, rank)
        return y + bcast(w["beta"], axis, rank) if center else y

    def infer(x, w):
        return norm(x, w, bcast(w["moving_mean"], axis, rank), bcast(w["moving_variance"], axis, rank))

    def train(x, w):
        return norm(x, w, *r_moments(x, axes))

    def updates(x, w):
        mean, var = (R.reshape(s, [-1]) for s in r_moments(x, axes))
        return {"moving_mean": w["moving_mean"] * momentum + mean * (1 - momentum),
                "moving_variance": w["moving_variance"] * momentum + var * (1 - momentum)}
    return infer, train, updates


@pytest.mark.parametrize("shape, axis, kwargs", [
    pytest.param((4,), -1, {}, id="dense-features"),
    pytest.param((3, 4, 4), 1, {"momentum": 0.9}, id="nchw"),
    pytest.param((4, 4, 3), -1, {"epsilon": 1e-2}, id="nhwc"),
    pytest.param((5,), -1, {"center": False, "scale": False}, id="no-center-no-scale"),
])
def test_batch_normalization(shape, axis, kwargs):
    rank = len(shape) + 1
    infer, train, updates = _bn_refs(axis % rank, rank, kwargs.get("momentum", 0.99), kwargs.get("epsilon", 1e-3),
                                     kwargs.get("center", True), kwargs.get("scale", True))
    check([F(*shape, lo=-2, hi=3)], lambda x: L.BatchNormalization(axis=axis, **kwargs)(x), infer,
          ref_train=train, ref_updates=updates, batch=4, rtol=1e-4)


def test_batch_normalization_training_true_in_predict():
    """Called with training=True (OneFlow's functional default), predict normalises with batch statistics."""
    infer, train, updates = _bn_refs(1, 4, 0.99, 1e-3)
    check([F(3, 4, 4, lo=-2, hi=3)], lambda x: L.batch_normalization(x, axis=1, training=True, name="bn1"), train,
          ref_updates=updates, batch=4, rtol=1e-4)


# --------------------------------------------------------------------------- LayerNormalization
@pytest.mark.parametrize("shape, axis, kwargs", [
    pytest.param((6,), -1, {}, id="last"),
    pytest.param((3, 4), -1, {"epsilon": 1e-5}, id="rank3-last"),
    pytest.param((3, 4), (1, 2), {}, id="two-axes"),
    pytest.param((3, 4), 1, {"center": False}, id="axis1-no-center"),
    pytest.param((3, 4), -1, {"scale": False}, id="no-scale"),
])
def test_layer_normalization(shape, axis, kwargs):
    rank = len(shape) + 1
    axes = sorted(a % rank for a in (axis if isinstance(axis, tuple) else (axis,)))
    eps = kwargs.get("epsilon", 1e-3)

    def ref(x, w):
        mean, var = r_moments(x, axes)
        y = (x - mean) / R.sqrt(var + eps)
        pshape = [x.shape[i] if i in axes else 1 for i in range(rank)]
        if kwargs.get("scale", True):
            y = y * R.reshape(w["gamma"], pshape)
        if kwargs.get("center", True):
            y = y + R.reshape(w["beta"], pshape)
        return y

    check([F(*shape, lo=-2, hi=3)], lambda x: L.LayerNormalization(axis=axis, **kwargs)(x), ref, rtol=1e-4)


# --------------------------------------------------------------------------- a small stack
def test_stack_conv_pool_bn_dense():
    """Layers composed: gradients flow through every one of them to the first."""
    def build(x):
        y = L.Conv2D(2, 3, padding="same", data_format="channels_first", name="c")(x)
        y = L.MaxPool2D(2, data_format="channels_first", name="p")(y)
        y = L.Flatten(name="f")(L.ReLU(name="r")(y))
        return L.Dense(3, activation="softmax", name="d")(y)

    x = flow.Input((1, 4, 4))
    out = build(x)
    model = flow.Model(x, out)
    rng = np.random.default_rng(5)
    ws = {w.path: rng.uniform(-0.5, 0.5, w.shape).astype(np.float32) for w in model.weights}
    model.set_weights([ws[w.path] for w in model.weights])
    xv = rng.uniform(-2, 2, (N, 1, 4, 4)).astype(np.float32)
    yv = rng.normal(size=(N, 3)).astype(np.float32)

    variables = {p: v.astype(np.float64) for p, v in ws.items()}

    def fwd(xt):
        y = r_conv2d(xt, variables["c/kernel"], (1, 1), "SAME", "NCHW") + bcast(variables["c/bias"], 1, 4)
        y = r_max_pool(y, (2, 2), (2, 2), "VALID", "NCHW")
        y = R.reshape(r_relu(y), (N, -1))
        return r_softmax(R.matmul(y, variables["d/kernel"]) + variables["d/bias"])

    np.testing.assert_allclose(model.predict(xv, verbose=0), fwd(R.constant(xv, F64)), rtol=1e-5,
                               atol=1e-6)
    def loss_of(values):
        variables.update(zip(variables, values))
        return float(np.mean(np.square(fwd(R.constant(xv, F64)) - yv)))

    grads = dict(zip(variables, R.gradients(loss_of, list(variables.values()))))
    model.compile(optimizer=flow.optimizers.SGD(1.0), loss=flow.losses.MeanSquaredError())
    model.fit(xv, yv, batch_size=N, epochs=1, shuffle=False, verbose=0)
    for w in model.weights:
        np.testing.assert_allclose(ws[w.path] - w.numpy(), grads[w.path], rtol=1e-4, atol=1e-6,
                                   err_msg=w.path)


# --------------------------------------------------------------------------- layers Keras guides use (issue 18)
def r_conv1d(x, k, stride, padding, dilation, channels_first):
    """Taps summed by hand: ``y[n, t, o] = sum_j x[n, t * stride + j * dilation, :] @ k[j]``."""
    if channels_first:
        x = R.transpose(x, (0, 2, 1))
    taps, width = k.shape[0], x.shape[1]
    span = (taps - 1) * dilation + 1
    if padding == "causal":
        x = R.pad(x, [[0, 0], [span - 1, 0], [0, 0]])
    elif padding == "same":
        out = -(-width // stride)
        total = max((out - 1) * stride + span - width, 0)
        x = R.pad(x, [[0, 0], [total // 2, total - total // 2], [0, 0]])
    out = (x.shape[1] - span) // stride + 1
    y = R.add_n([R.einsum("ntc,co->nto", x[:, j * dilation:j * dilation + (out - 1) * stride + 1:stride], k[j])
                  for j in range(taps)])
    return R.transpose(y, (0, 2, 1)) if channels_first else y


@pytest.mark.parametrize("fmt, k, s, pad, d", [
    ("channels_last", 3, 1, "valid", 1), ("channels_last", 3, 2, "same", 1), ("channels_last", 2, 1, "causal", 2),
    ("channels_first", 3, 1, "same", 1), ("channels_first", 2, 1, "causal", 1), ("channels_last", 1, 3, "valid", 1),
])
def test_conv1d(fmt, k, s, pad, d):
    first = fmt == "channels_first"
    check([F(3, 7) if first else F(7, 3)],
          lambda x: L.Conv1D(4, k, strides=s, padding=pad, data_format=fmt, dilation_rate=d)(x),
          lambda x, w: r_conv1d(x, w["kernel"], s, pad, d, first) + bcast(w["bias"], 1 if first else 2, 3))


@pytest.mark.parametrize("make, ref", [
    pytest.param(lambda: L.GlobalAveragePooling2D(), lambda x: R.reduce_mean(x, [1, 2]), id="gap"),
    pytest.param(lambda: L.GlobalAveragePooling2D(data_format="channels_first", keepdims=True),
                 lambda x: R.reduce_mean(x, [2, 3], keepdims=True), id="gap-nchw-keepdims"),
    pytest.param(lambda: L.GlobalMaxPooling2D(), lambda x: R.reduce_max(x, [1, 2]), id="gmp"),
    pytest.param(lambda: L.GlobalMaxPooling2D(data_format="channels_first"), lambda x: R.reduce_max(x, [2, 3]),
                 id="gmp-nchw"),
    pytest.param(lambda: L.UpSampling2D((2, 3)),
                 lambda x: R.repeat(R.repeat(x, 2, axis=1), 3, axis=2), id="upsampling"),
    pytest.param(lambda: L.UpSampling2D(2, data_format="channels_first"),
                 lambda x: R.repeat(R.repeat(x, 2, axis=2), 2, axis=3), id="upsampling-nchw"),
    pytest.param(lambda: L.ZeroPadding2D(), lambda x: R.pad(x, [[0, 0], [1, 1], [1, 1], [0, 0]]), id="zeropad"),
    pytest.param(lambda: L.ZeroPadding2D(((1, 2), (0, 3)), data_format="channels_first"),
                 lambda x: R.pad(x, [[0, 0], [0, 0], [1, 2], [0, 3]]), id="zeropad-nchw"),
    pytest.param(lambda: L.Rescaling(1 / 255.0, offset=-0.5), lambda x: x / 255.0 - 0.5, id="rescaling"),
])
def test_spatial_and_preprocessing_layers(make, ref):
    check([F(3, 4, 5)], lambda x: make()(x), ref, layer_weights=False)


@pytest.mark.parametrize("make, ref", [
    pytest.param(lambda a, b, c: L.Subtract()([a, b]), lambda a, b, c: a - b, id="Subtract"),
    pytest.param(lambda a, b, c: L.Multiply()([a, b, c]), lambda a, b, c: a * b * c, id="Multiply"),
    pytest.param(lambda a, b, c: L.Average()([a, b, c]), lambda a, b, c: (a + b + c) / 3.0, id="Average"),
    pytest.param(lambda a, b, c: L.add([a, b, c]), lambda a, b, c: a + b + c, id="add"),
    pytest.param(lambda a, b, c: L.subtract([c, a]), lambda a, b, c: c - a, id="subtract"),
    pytest.param(lambda a, b, c: L.multiply([a, c]), lambda a, b, c: a * c, id="multiply"),
    pytest.param(lambda a, b, c: L.average([b, c]), lambda a, b, c: (b + c) / 2.0, id="average"),
    pytest.param(lambda a, b, c: L.concatenate([a, b, c], axis=1), lambda a, b, c: R.concat([a, b, c], 1),
                 id="concatenate"),
])
def test_merging_layers(make, ref):
    check([F(2, 3), F(2, 3), F(2, 3)], make, ref, layer_weights=False)


@pytest.mark.parametrize("make, error, message", [
    (lambda x: L.Subtract()([x, x, x]), flow.LayerError, "Subtract.*expected exactly 2 inputs, received 3"),
    (lambda x: L.Multiply()([x, flow.layers.Dense(2)(x)]), flow.ShapeError, "Multiply.*expected inputs of one shape"),
    (lambda x: L.UpSampling2D(interpolation="bilinear")(x), flow.LayerError, "interpolation expected 'nearest'"),
    (lambda x: L.ZeroPadding2D((1, -1))(x), flow.LayerError, "padding expected an int >= 0"),
    (lambda x: L.Conv1D(2, 3)(x), flow.ShapeError, r"layer 'conv1d' \(Conv1D\): expected an input of rank 3"),
    (lambda x: L.Conv1D(2, 3, padding="full"), flow.LayerError, "padding expected 'valid', 'same' or 'causal'"),
    (lambda x: L.Rescaling("1/255"), flow.LayerError, "Rescaling.*scale expected a number"),
    (lambda x: L.Conv2DTranspose(2, 3, output_padding=1), flow.LayerError, "output_padding=1 is not supported"),
    (lambda x: L.Conv2DTranspose(2, 3, dilation_rate=2), flow.LayerError, "dilation_rate=2 is not supported"),
])
def test_new_layer_mistakes_are_named(make, error, message):
    x = flow.Input((4, 5, 3))
    with pytest.raises(error, match=message):
        make(x)


def r_conv2d_transpose(x, k, strides, padding, channels_first):
    """Each input pixel spreads ``x[n, i, j] @ k[a, b].T`` onto output ``(i * s + a, j * s + b)``, cropped as TF
    crops 'SAME': one 0/1 placement matrix per tap and dim, then an einsum (no convolution op)."""
    if channels_first:
        x = R.transpose(x, (0, 2, 3, 1))
    kh, kw = k.shape[0], k.shape[1]

    def placements(size, taps, s):
        full = (size - 1) * s + taps
        out = size * s if padding == "same" else full
        before = max(full - out, 0) // 2
        m = np.zeros((taps, out, size))
        for a in range(taps):
            for i in range(size):
                if 0 <= i * s + a - before < out:
                    m[a, i * s + a - before, i] = 1.0
        return R.constant(m, F64)

    ph, pw = placements(x.shape[1], kh, strides[0]), placements(x.shape[2], kw, strides[1])
    y = R.einsum("api,bqj,nijc,aboc->npqo", ph, pw, x, k)
    return R.transpose(y, (0, 3, 1, 2)) if channels_first else y


@pytest.mark.parametrize("fmt, k, s, pad", [
    ("channels_last", 3, 2, "valid"), ("channels_last", 3, 2, "same"), ("channels_last", (2, 3), (1, 2), "same"),
    ("channels_first", 3, 1, "valid"), ("channels_first", 2, 2, "same"),
])
def test_conv2d_transpose(fmt, k, s, pad):
    first = fmt == "channels_first"
    pair = lambda v: (v, v) if isinstance(v, int) else v  # noqa: E731
    check([F(3, 4, 5) if first else F(4, 5, 3)],
          lambda x: L.Conv2DTranspose(2, k, strides=s, padding=pad, data_format=fmt)(x),
          lambda x, w: r_conv2d_transpose(x, w["kernel"], pair(s), pad, first) + bcast(w["bias"], 1 if first else 3, 4))
