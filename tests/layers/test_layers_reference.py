"""Every layer against an independent float64 reference (plain TF math), forward and gradient.

Each layer's weights are set to random values; ``predict`` is compared with the reference.  Each
float input then passes through ``Scale`` (a trainable elementwise factor, all ones), and one
``fit`` step of ``SGD(1.0)`` with ``MeanSquaredError`` on the whole data moves every trainable
weight (the layer's and the inputs' scales) by minus the mean-loss gradient, compared with
``tf.GradientTape`` on the reference; non-trainable weights (BatchNormalization's moving
statistics) must move as the reference says.  One device, mirrored view.
"""
import math

import numpy as np
import pytest
import tensorflow as tf

import flowlayers as flow

N = 2             # batch
F64 = tf.float64
L = flow.layers


@pytest.fixture(autouse=True)
def _one_device(fresh):
    flow.config.gpu_device_num(1)
    flow.config.set_view("mirrored")


# --------------------------------------------------------------------------- harness
class Scale(flow.layers.Layer):
    """``x * w`` with ``w`` of the per-example shape, initialised to ones: its gradient is the input's."""

    def build(self, input_shape):
        self.w = self.add_weight("w", tuple(input_shape[1:]), initializer="ones")

    def call(self, x):
        return x * self.read(self.w)


def F(*shape, lo=-2.0, hi=2.0):
    return ("f", shape, lo, hi)


def I(*shape, high):  # noqa: E743
    return ("i", shape, 0, high)


_WEIGHT_RANGES = {"kernel": (-0.5, 0.5), "gamma": (0.5, 1.5), "moving_variance": (0.5, 1.5)}


def check(specs, build, ref, ref_train=None, ref_updates=None, grad=True, batch=N, rtol=1e-5, atol=1e-5,
          grad_rtol=1e-4, grad_atol=2e-6, seed=0):
    """``build(*blobs)`` -> output Blob; ``ref(*tensors, w)`` with ``w`` the layers' weights by short name.

    ``ref_train`` is the train-phase reference (default ``ref``); ``ref_updates(*tensors, w)`` gives the
    expected new values of non-trainable weights after the step (default: unchanged).
    """
    rng = np.random.default_rng(seed)
    values, inputs, blobs, scales = [], [], [], []
    for kind, shape, lo, hi in specs:
        if kind == "f":
            v = rng.uniform(lo, hi, (batch,) + shape).astype(np.float32)
            x = flow.Input(shape)
            layer = Scale()
            blobs.append(layer(x))
            scales.append(layer.w)
        else:
            v = rng.integers(lo, hi, (batch,) + shape).astype(np.int32)
            x = flow.Input(shape, dtype=flow.int32)
            blobs.append(x)
            scales.append(None)
        values.append(v)
        inputs.append(x)
    out = build(*blobs)
    model = flow.Model(inputs, out)
    scale_ids = {id(s) for s in scales if s is not None}
    layer_weights = [w for w in model.weights if id(w) not in scale_ids]
    w_values = {}
    for w in layer_weights:
        key = w.path.split("/")[-1]
        assert key not in w_values, f"two weights named {key!r}: give the reference unique names"
        lo, hi = _WEIGHT_RANGES.get(key, (-1.0, 1.0))
        w_values[key] = rng.uniform(lo, hi, w.shape).astype(np.float32)
        w.assign(w_values[key])
    feeds = values if len(values) > 1 else values[0]

    got = model.predict(feeds, batch_size=batch, verbose=0)
    tf_values = [tf.constant(v, F64 if v.dtype.kind == "f" else None) for v in values]
    tf_weights = {k: tf.constant(v, F64) for k, v in w_values.items()}
    want = ref(*tf_values, tf_weights).numpy()
    assert got.shape == want.shape, (got.shape, want.shape)
    np.testing.assert_allclose(got, want, rtol=rtol, atol=atol, err_msg="forward")
    if not grad:
        return got

    target = rng.normal(size=got.shape).astype(np.float32)
    trainable = [(w, "scale", k) for k, w in enumerate(scales) if w is not None]
    trainable += [(w, "weight", w.path.split("/")[-1]) for w in layer_weights if w.trainable]
    before = [w.numpy() for w, _, _ in trainable]
    model.compile(optimizer=flow.optimizers.SGD(1.0), loss=flow.losses.MeanSquaredError())
    model.fit(feeds, target, batch_size=batch, epochs=1, shuffle=False, verbose=0)
    got_grads = [b - w.numpy() for b, (w, _, _) in zip(before, trainable)]

    ref_vars = [tf.Variable(np.ones(w.shape) if kind == "scale" else w_values[key], dtype=F64)
                for w, kind, key in trainable]
    with tf.GradientTape() as tape:
        args, weights = list(tf_values), dict(tf_weights)
        for var, (w, kind, key) in zip(ref_vars, trainable):
            if kind == "scale":
                args[key] = tf_values[key] * var
            else:
                weights[key] = tf.identity(var)
        y = (ref_train or ref)(*args, weights)
        loss = tf.reduce_mean(tf.square(y - tf.constant(target, F64)))
    want_grads = tape.gradient(loss, ref_vars, unconnected_gradients=tf.UnconnectedGradients.ZERO)
    for (w, _, _), g, r in zip(trainable, got_grads, want_grads):
        np.testing.assert_allclose(g, tf.convert_to_tensor(r).numpy(), rtol=grad_rtol, atol=grad_atol,
                                   err_msg=f"gradient of {w.path}")
    expected = {k: v.numpy() for k, v in (ref_updates(*tf_values, tf_weights) if ref_updates else {}).items()}
    for w in layer_weights:
        key = w.path.split("/")[-1]
        if not w.trainable:
            np.testing.assert_allclose(w.numpy(), expected.get(key, w_values[key]), rtol=1e-5, atol=1e-6,
                                       err_msg=f"update of {w.path}")
    return got


# --------------------------------------------------------------------------- references (float64, plain math)
def r_sigmoid(x):
    return 1.0 / (1.0 + tf.exp(-x))


def r_relu(x):
    return tf.where(x > 0, x, tf.zeros_like(x))


def r_gelu(x):
    return 0.5 * x * (1 + tf.math.erf(x / math.sqrt(2.0)))


def r_softmax(x, axis=-1):
    z = tf.exp(x - tf.stop_gradient(tf.reduce_max(x, axis=axis, keepdims=True)))
    return z / tf.reduce_sum(z, axis=axis, keepdims=True)


def _same_pads(size, k, s, d=1):
    eff = (k - 1) * d + 1
    out = -(-size // s)
    total = max((out - 1) * s + eff - size, 0)
    return total // 2, total - total // 2


def _windows(x, ksize, strides, padding, dilations=(1, 1), fill=0.0):
    """NHWC ``x`` -> [((i, j), strided slice (N, OH, OW, C))] for every kernel tap."""
    (kh, kw), (sh, sw), (dh, dw) = ksize, strides, dilations
    if padding == "SAME":
        ph, pw = _same_pads(x.shape[1], kh, sh, dh), _same_pads(x.shape[2], kw, sw, dw)
        x = tf.pad(x, [[0, 0], list(ph), list(pw), [0, 0]], constant_values=fill)
    oh = (x.shape[1] - (kh - 1) * dh - 1) // sh + 1
    ow = (x.shape[2] - (kw - 1) * dw - 1) // sw + 1
    return [((i, j), x[:, i * dh:i * dh + (oh - 1) * sh + 1:sh, j * dw:j * dw + (ow - 1) * sw + 1:sw, :])
            for i in range(kh) for j in range(kw)]


def _nhwc(fn, x, fmt):
    if fmt == "NCHW":
        return tf.transpose(fn(tf.transpose(x, (0, 2, 3, 1))), (0, 3, 1, 2))
    return fn(x)


def r_conv2d(x, w, strides, padding, fmt, dilations=(1, 1)):
    def fn(t):
        taps = _windows(t, w.shape[:2], strides, padding, dilations)
        return tf.add_n([tf.einsum("nhwc,co->nhwo", patch, w[i, j]) for (i, j), patch in taps])
    return _nhwc(fn, x, fmt)


def r_max_pool(x, ksize, strides, padding, fmt):
    return _nhwc(lambda t: tf.reduce_max(tf.stack([p for _, p in _windows(t, ksize, strides, padding,
                                                                          fill=-np.inf)]), 0), x, fmt)


def r_avg_pool(x, ksize, strides, padding, fmt):
    def fn(t):
        total = tf.add_n([p for _, p in _windows(t, ksize, strides, padding)])
        count = tf.add_n([p for _, p in _windows(tf.ones_like(t), ksize, strides, padding)])
        return total / count
    return _nhwc(fn, x, fmt)


def _bcast(v, axis, rank):
    return tf.reshape(v, [-1 if i == axis else 1 for i in range(rank)])


# --------------------------------------------------------------------------- Dense
@pytest.mark.parametrize("shape, kwargs, act", [
    pytest.param((3,), {}, lambda y: y, id="linear"),
    pytest.param((3,), {"activation": "tanh"}, lambda y: (tf.exp(2 * y) - 1) / (tf.exp(2 * y) + 1), id="tanh"),
    pytest.param((3,), {"activation": "relu"}, r_relu, id="relu"),
    pytest.param((2, 5), {}, lambda y: y, id="rank3"),
    pytest.param((2, 5), {"use_bias": False, "activation": flow.nn.sigmoid}, r_sigmoid, id="rank3-nobias-callable"),
])
def test_dense(shape, kwargs, act):
    use_bias = kwargs.get("use_bias", True)
    check([F(*shape)], lambda x: L.Dense(4, **kwargs)(x),
          lambda x, w: act(tf.einsum("...k,ku->...u", x, w["kernel"]) + (w["bias"] if use_bias else 0.0)))


def test_dense_functional():
    check([F(3)], lambda x: L.dense(x, 4, activation="relu", name="dense1"),
          lambda x, w: r_relu(tf.einsum("nk,ku->nu", x, w["kernel"]) + w["bias"]))


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
            y = y + _bcast(w["bias"], 1 if nchw else 3, 4)
        return r_relu(y) if act == "relu" else y

    check([F(*x_shape)], lambda x: L.Conv2D(f, k, strides=s, padding=pad, data_format=fmt, dilation_rate=d,
                                            use_bias=bias, activation=act)(x), ref)


def test_conv2d_functional_nchw_default():
    check([F(2, 5, 5)], lambda x: L.conv2d(x, 3, kernel_size=3, padding="SAME", name="conv1"),
          lambda x, w: r_conv2d(x, w["kernel"], (1, 1), "SAME", "NCHW") + _bcast(w["bias"], 1, 4))


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
    pytest.param((2, 3, 4), lambda: L.Flatten(), lambda x: tf.reshape(x, (N, 24)), id="Flatten"),
    pytest.param((5,), lambda: L.Flatten(), lambda x: x, id="Flatten-rank2"),
    pytest.param((2, 3, 4), lambda: L.Reshape((4, 6)), lambda x: tf.reshape(x, (N, 4, 6)), id="Reshape"),
    pytest.param((2, 3, 4), lambda: L.Reshape((-1, 2)), lambda x: tf.reshape(x, (N, 12, 2)), id="Reshape-neg1"),
])
def test_reshaping(shape, make, ref):
    check([F(*shape)], lambda x: make()(x), lambda x, w: ref(x))


# --------------------------------------------------------------------------- activations
@pytest.mark.parametrize("make, ref", [
    pytest.param(lambda: L.Activation("gelu"), r_gelu, id="Activation-gelu"),
    pytest.param(lambda: L.Activation("softmax"), r_softmax, id="Activation-softmax"),
    pytest.param(lambda: L.Activation(flow.nn.tanh), tf.tanh, id="Activation-callable"),
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
          lambda *args: tf.concat(args[:-1], axis=axis))


# --------------------------------------------------------------------------- Embedding
@pytest.mark.parametrize("shape", [(4,), (2, 3)])
def test_embedding(shape):
    check([I(*shape, high=6)], lambda ids: L.Embedding(6, 3)(ids),
          lambda ids, w: tf.einsum("...r,rd->...d", tf.one_hot(ids, 6, dtype=F64), w["embeddings"]), batch=3)


def test_embedding_into_dense():
    check([I(4, high=5), F(4, 3)], lambda ids, x: L.Dense(2)(L.Add()([L.Embedding(5, 3)(ids), x])),
          lambda ids, x, w: tf.einsum("nrd,du->nru", tf.gather(w["embeddings"], ids) + x, w["kernel"]) + w["bias"])


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
        y = (x - mean) / tf.sqrt(var + eps)
        if scale:
            y = y * _bcast(w["gamma"], axis, rank)
        return y + _bcast(w["beta"], axis, rank) if center else y

    def batch_stats(x):
        mean = tf.reduce_mean(x, axis=axes, keepdims=True)
        return mean, tf.reduce_mean(tf.square(x - mean), axis=axes, keepdims=True)

    def infer(x, w):
        return norm(x, w, _bcast(w["moving_mean"], axis, rank), _bcast(w["moving_variance"], axis, rank))

    def train(x, w):
        return norm(x, w, *batch_stats(x))

    def updates(x, w):
        mean, var = (tf.reshape(s, [-1]) for s in batch_stats(x))
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
        mean = tf.reduce_mean(x, axis=axes, keepdims=True)
        var = tf.reduce_mean(tf.square(x - mean), axis=axes, keepdims=True)
        y = (x - mean) / tf.sqrt(var + eps)
        pshape = [x.shape[i] if i in axes else 1 for i in range(rank)]
        if kwargs.get("scale", True):
            y = y * tf.reshape(w["gamma"], pshape)
        if kwargs.get("center", True):
            y = y + tf.reshape(w["beta"], pshape)
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

    variables = {p: tf.Variable(v, dtype=F64) for p, v in ws.items()}

    def fwd(xt):
        y = r_conv2d(xt, variables["c/kernel"], (1, 1), "SAME", "NCHW") + _bcast(variables["c/bias"], 1, 4)
        y = r_max_pool(y, (2, 2), (2, 2), "VALID", "NCHW")
        y = tf.reshape(r_relu(y), (N, -1))
        return r_softmax(tf.matmul(y, variables["d/kernel"]) + variables["d/bias"])

    np.testing.assert_allclose(model.predict(xv, verbose=0), fwd(tf.constant(xv, F64)).numpy(), rtol=1e-5,
                               atol=1e-6)
    with tf.GradientTape() as tape:
        loss = tf.reduce_mean(tf.square(fwd(tf.constant(xv, F64)) - yv))
    grads = dict(zip(variables, tape.gradient(loss, list(variables.values()))))
    model.compile(optimizer=flow.optimizers.SGD(1.0), loss=flow.losses.MeanSquaredError())
    model.fit(xv, yv, batch_size=N, epochs=1, shuffle=False, verbose=0)
    for w in model.weights:
        np.testing.assert_allclose(ws[w.path] - w.numpy(), grads[w.path].numpy(), rtol=1e-4, atol=1e-6,
                                   err_msg=w.path)
