"""The reference harness of tests/ops and tests/layers: a graph against an independent float64 reference
(numpy math written out, ``numeric.py``: no engine), forward and gradient.

Forward: a Model from ``flow.Input``s to ``build(*blobs)``, ``predict``, compared with ``ref(*tensors)``.
Gradient: each float input passes through ``Scale`` (a trainable elementwise factor, all ones) and
non-batch operands are trainable ``Param``s; one ``fit`` step of ``SGD(1.0)`` with ``MeanSquaredError``
on the whole data moves every trainable weight by minus the mean-loss gradient, compared with central
differences of the reference's loss in float64.
"""
import math

import numpy as np
import numeric as R

import flowlayers as flow

N = 2             # batch
F64 = R.float64


class Scale(flow.layers.Layer):
    """``x * w`` with ``w`` of the per-example shape, initialised to ones: its gradient is the input's."""

    def build(self, input_shape):
        self.w = self.add_weight("w", tuple(input_shape[1:]), initializer="ones")

    def call(self, x):
        return x * self.read(self.w)


class Param(flow.layers.Layer):
    """A trainable tensor with no batch dim (a kernel, a bias, a table); the input only anchors the call."""

    def __init__(self, shape, **kwargs):
        super().__init__(**kwargs)
        self.shape = tuple(shape)

    def build(self, input_shape):
        self.w = self.add_weight("w", self.shape, initializer="zeros")

    def call(self, x):
        return self.read(self.w)


class Spec:
    """kind 'f': float input (batched), 'i': int input (batched), 'p': float Param (no batch dim)."""

    def __init__(self, kind, shape, lo=-2.0, hi=2.0, dtype=None, values=None):
        self.kind, self.shape, self.lo, self.hi, self.dtype, self.values = kind, tuple(shape), lo, hi, dtype, values

    def sample(self, rng, batch):
        if self.values is not None:
            return np.asarray(self.values, self.dtype or (np.int32 if self.kind == "i" else np.float32))
        shape = ((batch,) if self.kind != "p" else ()) + self.shape
        if self.kind == "i":
            return rng.integers(int(self.lo), int(self.hi), size=shape).astype(self.dtype or np.int32)
        return rng.uniform(self.lo, self.hi, size=shape).astype(np.float32)


def F(*shape, lo=-2.0, hi=2.0, values=None):
    return Spec("f", shape, lo, hi, values=values)


def I(*shape, high, dtype=np.int32, values=None):  # noqa: E743
    return Spec("i", shape, 0, high, dtype, values)


def P(*shape, lo=-1.0, hi=1.0):
    return Spec("p", shape, lo, hi)


# initial value ranges of the layers' own weights, by short name (default (-1, 1))
WEIGHT_RANGES = {"kernel": (-0.5, 0.5), "gamma": (0.5, 1.5), "moving_variance": (0.5, 1.5)}


def _as_tuple(x):
    return tuple(x) if isinstance(x, (list, tuple)) else (x,)


def check(specs, build, ref, layer_weights=False, ref_train=None, ref_updates=None, grad=True, batch=N,
          rtol=1e-5, atol=1e-5, grad_rtol=1e-4, grad_atol=2e-6, seed=0):
    """Forward and (``grad``) gradient of ``build(*blobs)`` against ``ref(*tensors)``; returns the outputs (a tuple).

    ``specs``: one ``F``/``I``/``P`` per argument of ``build`` and ``ref``.  ``layer_weights``: the weights the
    built layers own get random values and ``ref`` receives them after the tensors, a dict by short name
    (``w["kernel"]``).  ``ref_train``: the train-phase reference (default ``ref``).  ``ref_updates(*tensors, w)``:
    the expected new values of non-trainable layer weights after the step (default: unchanged).
    """
    rng = np.random.default_rng(seed)
    values = [s.sample(rng, batch) for s in specs]
    inputs, blobs = [], [None] * len(specs)
    trainable = []   # (variable, kind, key): 'scale' of input `key`, 'param' of spec `key`, 'weight' named `key`
    for k, (s, v) in enumerate(zip(specs, values)):
        if s.kind == "f":
            x = flow.Input(v.shape[1:])
            scale = Scale()
            blobs[k] = scale(x)
            trainable.append((scale.w, "scale", k))
        elif s.kind == "i":
            x = flow.Input(v.shape[1:], dtype=flow.int64 if v.dtype == np.int64 else flow.int32)
            blobs[k] = x
        else:
            continue
        inputs.append(x)
    for k, s in enumerate(specs):
        if s.kind == "p":
            param = Param(s.shape)
            blobs[k] = param(inputs[0])
            param.w.assign(values[k])
            trainable.append((param.w, "param", k))
    outs = _as_tuple(build(*blobs))
    model = flow.Model(inputs, list(outs) if len(outs) > 1 else outs[0])

    harness = {id(w) for w, _, _ in trainable}
    own = [w for w in model.weights if id(w) not in harness]
    assert layer_weights or not own, f"build made weights {[w.path for w in own]}: pass layer_weights=True"
    w_values = {}
    for w in own:
        key = w.path.split("/")[-1]
        assert key not in w_values, f"two weights named {key!r}: give the reference unique names"
        w_values[key] = rng.uniform(*WEIGHT_RANGES.get(key, (-1.0, 1.0)), w.shape).astype(np.float32)
        w.assign(w_values[key])
    trainable += [(w, "weight", w.path.split("/")[-1]) for w in own if w.trainable]
    feeds = [v for s, v in zip(specs, values) if s.kind != "p"]
    feeds = feeds if len(feeds) > 1 else feeds[0]
    tf_values = [R.constant(v, F64 if v.dtype.kind == "f" else None) for v in values]
    tf_weights = {k: R.constant(v, F64) for k, v in w_values.items()}
    extra = [tf_weights] if layer_weights else []

    got = _as_tuple(model.predict(feeds, batch_size=batch, verbose=0))
    want = _as_tuple(ref(*tf_values, *extra))
    assert len(got) == len(want)
    for g, w in zip(got, want):
        w = np.asarray(w)
        assert g.shape == w.shape, (g.shape, w.shape)
        np.testing.assert_allclose(g, w, rtol=rtol, atol=atol, err_msg="forward")
    if not grad:
        return got

    # gradient: one SGD(1.0) step on the whole batch moves each weight by minus the mean-loss gradient
    out = outs[0]
    train_model = model if len(outs) == 1 else flow.Model(inputs, out)
    target = rng.normal(size=got[0].shape).astype(out.dtype.numpy)
    before = [w.numpy() for w, _, _ in trainable]
    train_model.compile(optimizer=flow.optimizers.SGD(1.0), loss=flow.losses.MeanSquaredError())
    train_model.fit(feeds, target, batch_size=batch, epochs=1, shuffle=False, verbose=0)
    got_grads = [b - w.numpy() for b, (w, _, _) in zip(before, trainable)]

    def start(w, kind, key):   # the reference's copy of a trainable weight before the step
        return np.ones(w.shape) if kind == "scale" else values[key] if kind == "param" else w_values[key]

    def loss_of(ref_vars):
        args, weights = list(tf_values), dict(tf_weights)
        for var, (w, kind, key) in zip(ref_vars, trainable):
            if kind == "scale":
                args[key] = tf_values[key] * var
            elif kind == "param":
                args[key] = var
            else:
                weights[key] = var
        y = _as_tuple((ref_train or ref)(*args, *([weights] if layer_weights else [])))[0]
        return float(np.mean(np.square(y - target.astype(np.float64))))

    want_grads = R.gradients(loss_of, [np.array(start(*t), np.float64) for t in trainable])
    for (w, _, _), g, r in zip(trainable, got_grads, want_grads):
        np.testing.assert_allclose(g, r, rtol=grad_rtol, atol=grad_atol, err_msg=f"gradient of {w.path}")
    expected = {k: np.asarray(v) for k, v in (ref_updates(*tf_values, tf_weights) if ref_updates else {}).items()}
    for w in own:
        key = w.path.split("/")[-1]
        if not w.trainable:
            np.testing.assert_allclose(w.numpy(), expected.get(key, w_values[key]), rtol=1e-5, atol=1e-6,
                                       err_msg=f"update of {w.path}")
    return got


# --------------------------------------------------------------------------- references (float64, plain math)
def where(cond, a, b):
    """``R.where`` taking Python numbers for either branch."""
    a = R.convert_to_tensor(a, F64)
    return R.where(cond, a, R.zeros_like(a) + b)


def r_relu(x):
    return where(x > 0, x, 0.0)


def r_sigmoid(x):
    return 1.0 / (1.0 + R.exp(-x))


def r_gelu(x):
    return 0.5 * x * (1 + R.math.erf(x / math.sqrt(2.0)))


def r_log_softmax(x, axis=-1):
    z = x - R.stop_gradient(R.reduce_max(x, axis=axis, keepdims=True))
    return z - R.math.log(R.reduce_sum(R.exp(z), axis=axis, keepdims=True))


def r_softmax(x, axis=-1):
    return R.exp(r_log_softmax(x, axis))


def r_moments(x, axes):
    mean = R.reduce_mean(x, axis=axes, keepdims=True)
    return mean, R.reduce_mean(R.square(x - mean), axis=axes, keepdims=True)


def bcast(v, axis, rank):
    """1-D ``v`` laid along ``axis`` of a rank-``rank`` tensor."""
    return R.reshape(v, [-1 if i == axis else 1 for i in range(rank)])


def _same_pads(size, k, s, d=1):
    eff = (k - 1) * d + 1
    out = -(-size // s)
    total = max((out - 1) * s + eff - size, 0)
    return total // 2, total - total // 2


def _windows(x, ksize, strides, padding, dilations=(1, 1), fill=0.0):
    """NHWC ``x`` -> list of ((i, j), strided slice (N, OH, OW, C)) for every kernel tap."""
    (kh, kw), (sh, sw), (dh, dw) = ksize, strides, dilations
    if padding == "SAME":
        ph, pw = _same_pads(x.shape[1], kh, sh, dh), _same_pads(x.shape[2], kw, sw, dw)
        x = R.pad(x, [[0, 0], list(ph), list(pw), [0, 0]], constant_values=fill)
    oh = (x.shape[1] - (kh - 1) * dh - 1) // sh + 1
    ow = (x.shape[2] - (kw - 1) * dw - 1) // sw + 1
    return [((i, j), x[:, i * dh:i * dh + (oh - 1) * sh + 1:sh, j * dw:j * dw + (ow - 1) * sw + 1:sw, :])
            for i in range(kh) for j in range(kw)]


def _nhwc(fn, x, fmt):
    if fmt == "NCHW":
        return R.transpose(fn(R.transpose(x, (0, 2, 3, 1))), (0, 3, 1, 2))
    return fn(x)


def r_conv2d(x, w, strides, padding, fmt, dilations=(1, 1)):
    """``w``: (kh, kw, in, out); ``strides``, ``dilations``: pairs; ``padding``: 'SAME' or 'VALID'."""
    def fn(t):
        taps = _windows(t, w.shape[:2], strides, padding, dilations)
        return R.add_n([R.einsum("nhwc,co->nhwo", patch, w[i, j]) for (i, j), patch in taps])
    return _nhwc(fn, x, fmt)


def r_max_pool(x, ksize, strides, padding, fmt):
    return _nhwc(lambda t: R.reduce_max(R.stack([p for _, p in _windows(t, ksize, strides, padding,
                                                                          fill=-np.inf)]), 0), x, fmt)


def r_avg_pool(x, ksize, strides, padding, fmt):
    def fn(t):
        total = R.add_n([p for _, p in _windows(t, ksize, strides, padding)])
        count = R.add_n([p for _, p in _windows(R.ones_like(t), ksize, strides, padding)])
        return total / count               # padding cells are not counted
    return _nhwc(fn, x, fmt)
