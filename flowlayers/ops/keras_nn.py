"""Keras 3's neural-network ``keras.ops``: activations, softmax, ``one_hot``, ``normalize``, ``moments`` and
``dot_product_attention``, with Keras' arguments and formulas.

On Blobs they build the ops of ``elementwise.py``, ``nn.py`` and ``attention.py`` (what has no op of its own, as the
tanh form of ``gelu``, is composed of them, and plans with their signatures); on numbers and numpy arrays they
compute the same formulas with numpy.
"""
import math

import numpy as np

from .. import dtypes
from ..errors import GraphError, ShapeError, describe_shape
from . import attention, elementwise as ew, nn, reduce
from .dispatch import axis_tuple, blob, floating, host_floating, promoted, symbolic
from .keras_arrays import expand_dims, moveaxis, split
from .keras_elementwise import _host_erf

_SELU_ALPHA, _SELU_SCALE = 1.6732632423543772848170429916717, 1.0507009873554804934193349852946


def _activation(name, graph_fn, host_fn, doc=""):
    def fn(x):
        return graph_fn(floating(x)) if symbolic(x) else np.asarray(host_fn(host_floating(x)))
    fn.__name__ = fn.__qualname__ = name
    fn.__doc__ = doc or f"Keras' ``ops.{name}(x)``."
    return fn


def _host_sigmoid(x):
    return (1 / (1 + np.exp(-x))).astype(x.dtype)


def _host_softplus(x):
    return np.logaddexp(x, 0).astype(x.dtype)


def _host_hard_sigmoid(x):
    return np.clip(x + 3, 0, 6) / 6


relu = _activation("relu", ew.relu, lambda x: np.maximum(x, 0))
relu6 = _activation("relu6", ew.relu6, lambda x: np.clip(x, 0, 6))
sigmoid = _activation("sigmoid", ew.sigmoid, _host_sigmoid)
softplus = _activation("softplus", ew.softplus, _host_softplus)
softsign = _activation("softsign", ew.softsign, lambda x: x / (1 + np.abs(x)))
silu = _activation("silu", ew.silu, lambda x: x * _host_sigmoid(x))
swish = _activation("swish", ew.silu, lambda x: x * _host_sigmoid(x))
log_sigmoid = _activation("log_sigmoid", lambda x: ew.negative(ew.softplus(ew.negative(x))),
                          lambda x: -_host_softplus(-x))
hard_sigmoid = _activation("hard_sigmoid", ew.hard_sigmoid, _host_hard_sigmoid,
                           "Keras' ``ops.hard_sigmoid(x)``: ``relu6(x + 3) / 6``.")
hard_silu = _activation("hard_silu", lambda x: ew.multiply(x, ew.hard_sigmoid(x)),
                        lambda x: x * _host_hard_sigmoid(x), "Keras' ``ops.hard_silu(x)``: ``x * hard_sigmoid(x)``.")
hard_swish = _activation("hard_swish", hard_silu, lambda x: x * _host_hard_sigmoid(x))
selu = _activation("selu", ew.selu,
                   lambda x: _SELU_SCALE * np.where(x > 0, x, _SELU_ALPHA * np.expm1(np.minimum(x, 0))))


def leaky_relu(x, negative_slope=0.2):
    """Keras' ``ops.leaky_relu(x, negative_slope=0.2)``."""
    if symbolic(x):
        return ew.leaky_relu(floating(x), alpha=negative_slope)
    x = host_floating(x)
    return np.where(x > 0, x, negative_slope * x).astype(x.dtype)


def elu(x, alpha=1.0):
    """Keras' ``ops.elu(x, alpha=1.0)``: ``x`` above 0, ``alpha * (exp(x) - 1)`` below."""
    if not symbolic(x):
        x = host_floating(x)
        return np.where(x > 0, x, alpha * np.expm1(np.minimum(x, 0))).astype(x.dtype)
    x = floating(x)
    if alpha == 1.0:
        return ew.elu(x)
    below = ew.multiply(ew.expm1(ew.minimum(x, 0.0)), float(alpha))
    return ew.where(ew.greater(x, 0.0), x, below)


def celu(x, alpha=1.0):
    """Keras' ``ops.celu(x, alpha=1.0)``: ``x`` above 0, ``alpha * (exp(x / alpha) - 1)`` below."""
    if not symbolic(x):
        x = host_floating(x)
        return np.where(x > 0, x, alpha * np.expm1(np.minimum(x, 0) / alpha)).astype(x.dtype)
    x = floating(x)
    below = ew.multiply(ew.expm1(ew.divide(ew.minimum(x, 0.0), float(alpha))), float(alpha))
    return ew.where(ew.greater(x, 0.0), x, below)


def gelu(x, approximate=True):
    """Keras' ``ops.gelu(x, approximate=True)``: the tanh approximation by default, ``x * Phi(x)`` exactly with
    ``approximate=False``."""
    c = math.sqrt(2 / math.pi)
    if not symbolic(x):
        x = host_floating(x)
        if approximate:
            return (0.5 * x * (1 + np.tanh(c * (x + 0.044715 * x ** 3)))).astype(x.dtype)
        return (0.5 * x * (1 + _host_erf(x / math.sqrt(2)))).astype(x.dtype)
    x = floating(x)
    if not approximate:
        return ew.gelu(x)
    inner = ew.multiply(ew.add(x, ew.multiply(ew.pow(x, 3.0), 0.044715)), c)
    return ew.multiply(ew.multiply(x, 0.5), ew.add(ew.tanh(inner), 1.0))


def glu(x, axis=-1):
    """Keras' ``ops.glu(x, axis=-1)``: ``a * sigmoid(b)`` of ``x``'s two halves along ``axis``."""
    a, b = split(x, 2, axis)
    if not symbolic(x):
        return a * _host_sigmoid(b)
    return ew.multiply(a, ew.sigmoid(b))


def softmax(x, axis=-1):
    """Keras' ``ops.softmax(x, axis=-1)``; ``axis`` an int or a tuple of them."""
    if not symbolic(x):
        x = host_floating(x)
        shifted = np.exp(x - np.max(x, axis=axis, keepdims=True))
        return shifted / np.sum(shifted, axis=axis, keepdims=True)
    x = floating(x)
    if isinstance(axis, int):
        return nn.softmax(x, axis)
    axes = axis_tuple(axis, x.ndim)
    shifted = ew.exp(ew.subtract(x, ew.stop_gradient(reduce.reduce_max(x, axes, keepdims=True))))
    return ew.divide(shifted, reduce.reduce_sum(shifted, axes, keepdims=True))


def log_softmax(x, axis=-1):
    """Keras' ``ops.log_softmax(x, axis=-1)``; ``axis`` an int or a tuple of them."""
    if not symbolic(x):
        x = host_floating(x)
        shifted = x - np.max(x, axis=axis, keepdims=True)
        return shifted - np.log(np.sum(np.exp(shifted), axis=axis, keepdims=True))
    x = floating(x)
    if isinstance(axis, int):
        return nn.log_softmax(x, axis)
    axes = axis_tuple(axis, x.ndim)
    shifted = ew.subtract(x, ew.stop_gradient(reduce.reduce_max(x, axes, keepdims=True)))
    return ew.subtract(shifted, ew.log(reduce.reduce_sum(ew.exp(shifted), axes, keepdims=True)))


def one_hot(x, num_classes, axis=-1, dtype=None, sparse=False):
    """Keras' ``ops.one_hot``: ids (floats are cast to int32) to one-hot vectors along ``axis``; an id outside
    [0, num_classes) gives zeros.  Sparse results are not supported (refused by name)."""
    if sparse:
        raise GraphError("flow.ops.one_hot(sparse=True): sparse tensors are not supported by flowlayers; expected "
                         "sparse=False, received True")
    dtype = dtypes.as_dtype(dtype, "flow.ops.one_hot(dtype)")
    if not symbolic(x):
        ids = np.asarray(x).astype(np.int64)
        out = (ids[..., None] == np.arange(num_classes)).astype(dtype.numpy)
        return np.moveaxis(out, -1, axis)
    ids = blob(x)
    ids = ids if ids.dtype.is_integer else ew.cast(ids, dtypes.int32)
    out = nn.one_hot(ids, num_classes, dtype)
    return out if axis in (-1, ids.ndim) else moveaxis(out, -1, axis)


def normalize(x, axis=-1, order=2, epsilon=None):
    """Keras' ``ops.normalize``: ``x`` divided by its ``order``-norm along ``axis`` (at least ``epsilon``)."""
    if isinstance(order, bool) or not isinstance(order, int) or order < 1:
        raise ShapeError(f"flow.ops.normalize: expected an int order >= 1, received order={order!r}")
    epsilon = 1e-7 if epsilon is None else epsilon
    if not symbolic(x):
        x = host_floating(x)
        if order == 2:
            return x * np.minimum(1 / np.sqrt(np.sum(x * x, axis=axis, keepdims=True)), 1 / epsilon)
        norm = np.sum(np.abs(x) ** order, axis=axis, keepdims=True) ** (1 / order)
        return x / np.maximum(norm, epsilon)
    x = floating(x)
    axes = axis_tuple(axis, x.ndim)
    if order == 2:
        inv = ew.rsqrt(reduce.reduce_sum(ew.square(x), axes, keepdims=True))
        return ew.multiply(x, ew.minimum(inv, 1.0 / epsilon))
    summed = reduce.reduce_sum(ew.pow(ew.abs(x), float(order)), axes, keepdims=True)
    return ew.divide(x, ew.maximum(ew.pow(summed, 1.0 / order), float(epsilon)))


def moments(x, axes, keepdims=False, synchronized=False):
    """Keras' ``ops.moments``: ``(mean, variance)`` over ``axes``.  ``synchronized=True`` (statistics over the
    replicas of a data-parallel step) is refused by name: a flowlayers graph is logical, so its statistics are
    already over the whole batch in the consistent view."""
    if synchronized:
        raise GraphError("flow.ops.moments(synchronized=True) is not supported: expected synchronized=False (the "
                         "graph is logical: in the consistent view the moments are over the whole batch), received "
                         "True")
    if not symbolic(x):
        x = host_floating(x)
        return np.mean(x, axis=tuple(axes), keepdims=keepdims), np.var(x, axis=tuple(axes), keepdims=keepdims)
    x = floating(x)
    axes = axis_tuple(axes, x.ndim)
    mean = reduce.reduce_mean(x, axes, keepdims=True)
    variance = reduce.reduce_mean(ew.square(ew.subtract(x, mean)), axes, keepdims)
    return (mean if keepdims else reduce.reduce_mean(x, axes)), variance


def dot_product_attention(query, key, value, bias=None, mask=None, scale=None, is_causal=False, flash_attention=None,
                          attn_logits_soft_cap=None):
    """Keras' ``ops.dot_product_attention``: ``softmax(q k^T * scale + bias, masked) v`` for ``(batch, time, heads,
    depth)`` inputs; key and value may have fewer heads dividing the query's (grouped-query attention).  ``mask``
    (True: attend) and ``bias`` broadcast to ``(batch, heads, query time, key time)`` as numpy broadcasts.

    On Blobs it is one op (``flowlayers/ops/attention.py``) that each engine lowers to its fused kernel;
    ``flash_attention`` as Keras means it (None: the engine picks; True: a flash kernel or a named error; False:
    the plain form).  ``attn_logits_soft_cap`` (Keras: JAX on TPU only) is refused by name."""
    if attn_logits_soft_cap is not None:
        raise GraphError(f"flow.ops.dot_product_attention: attn_logits_soft_cap is not supported by flowlayers; "
                         f"expected None, received {attn_logits_soft_cap!r}")
    tensors = [t for t in (query, key, value, bias, mask) if t is not None]
    if not symbolic(*tensors):
        if flash_attention is not None and flash_attention is not False:
            raise GraphError(f"flow.ops.dot_product_attention(flash_attention={flash_attention!r}): on numpy arrays "
                             f"it computes with numpy, which has no flash kernel; expected flash_attention None or "
                             f"False, received {flash_attention!r}")
        return _host_attention(query, key, value, bias, mask, scale, is_causal)
    q, k, v = promoted(query, key, value)
    for name, t in (("query", q), ("key", k), ("value", v)):
        if t.ndim != 4:
            raise ShapeError(f"flow.ops.dot_product_attention: expected a 4-D {name} (batch, time, heads, depth), "
                             f"received shape {describe_shape(t.shape)}")
    scale = 1.0 / math.sqrt(q.shape[-1]) if scale is None else float(scale)
    bias = None if bias is None else _rank4(blob(bias, q.dtype), "bias")
    mask = None if mask is None else _rank4(blob(mask, dtypes.bool_), "mask")
    return attention.dot_product_attention(q, k, v, bias, mask, scale, is_causal, flash_attention)


def _rank4(t, name):
    """A bias or mask of rank at most 4 with leading dims of 1 (numpy's broadcasting) up to rank 4."""
    if t.ndim > 4:
        raise ShapeError(f"flow.ops.dot_product_attention: expected a {name} of rank at most 4 broadcasting to "
                         f"(batch, heads, query time, key time), received shape {describe_shape(t.shape)}")
    return t if t.ndim == 4 else expand_dims(t, tuple(range(4 - t.ndim)))


def _host_attention(query, key, value, bias, mask, scale, is_causal):
    q, k, v = (host_floating(t) for t in (query, key, value))
    heads, kv_heads = q.shape[2], k.shape[2]
    k, v = (np.repeat(t, heads // kv_heads, axis=2) for t in (k, v))
    scale = 1.0 / math.sqrt(q.shape[-1]) if scale is None else scale
    logits = np.einsum("btnh,bsnh->bnts", q, k) * scale
    if bias is not None:
        logits = logits + np.asarray(bias)
    keep = np.ones(logits.shape, bool)
    if mask is not None:
        keep &= np.asarray(mask).astype(bool)
    if is_causal:
        keep &= np.tril(np.ones(logits.shape[2:], bool))
    logits = np.where(keep, logits, -0.7 * np.finfo(logits.dtype).max)
    probs = np.exp(logits - logits.max(-1, keepdims=True))
    probs /= probs.sum(-1, keepdims=True)
    return np.einsum("bnts,bsnh->btnh", probs, v).astype(q.dtype)
