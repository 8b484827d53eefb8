"""softmax, cross-entropies, dropout, gaussian noise, one_hot (``flowlayers/ops/nn.py``)."""
import math

import tensorflow as tf

from ..dtypes import tf_dtype


def softmax(node, x, ctx):
    return tf.nn.softmax(x, axis=node.attrs["axis"])


def log_softmax(node, x, ctx):
    return tf.nn.log_softmax(x, axis=node.attrs["axis"])


def sparse_softmax_cross_entropy(node, labels, logits, ctx):
    if ctx.splits(node, 1, -1):
        return _split_classes_cross_entropy(labels, logits)
    return tf.nn.sparse_softmax_cross_entropy_with_logits(labels=labels, logits=logits)


def _split_classes_cross_entropy(labels, logits):
    """``logsumexp(logits) - logits[label]`` from per-row reductions over the classes, which DTensor runs as a local
    reduction and an all-reduce each when the classes are split: the logits are never gathered.  (TF's fused
    kernel would have them whole on each device.)  The max only steadies the exponentials: no gradient."""
    top = tf.stop_gradient(tf.reduce_max(logits, axis=-1, keepdims=True))
    shifted = logits - top
    label_logit = tf.reduce_sum(shifted * tf.one_hot(labels, logits.shape[-1], dtype=logits.dtype), axis=-1)
    return tf.math.log(tf.reduce_sum(tf.exp(shifted), axis=-1)) - label_logit


def softmax_cross_entropy(node, labels, logits, ctx):
    return tf.nn.softmax_cross_entropy_with_logits(labels=labels, logits=logits)


def sigmoid_cross_entropy(node, labels, logits, ctx):
    return tf.nn.sigmoid_cross_entropy_with_logits(labels=labels, logits=logits)


def _draw_shape(x, noise_shape):
    """The shape to draw for ``x``: its own, or Keras' ``noise_shape`` (1 where one draw serves a whole dim)."""
    if noise_shape is None:
        return tf.shape(x)
    return tf.stack([tf.shape(x)[i] if d is None else d for i, d in enumerate(noise_shape)])


def dropout(node, x, ctx):
    rate = node.attrs["rate"]
    if not ctx.training(node.attrs["training"]) or rate == 0.0:
        return tf.identity(x)
    shape = _draw_shape(x, node.attrs.get("noise_shape"))
    keep = ctx.random_uniform(shape, node.name, node.attrs.get("seed")) >= rate
    return tf.where(keep, x / (1.0 - rate), tf.zeros_like(x))


def gaussian_noise(node, x, ctx):
    """N(0, 1) by Box-Muller from two uniform draws (the step's seeded uniforms: reruns repeat them)."""
    a = node.attrs
    if not ctx.training(a["training"]) or a["stddev"] == 0.0:
        return tf.identity(x)
    u1, u2 = (ctx.random_uniform(tf.shape(x), f"{node.name}:{i}", a["seed"]) for i in (1, 2))
    z = tf.sqrt(-2.0 * tf.math.log(1.0 - u1)) * tf.cos(2.0 * math.pi * u2)
    noise = tf.cast(z, x.dtype) * a["stddev"]
    return x * (1.0 + noise) if a["multiplicative"] else x + noise


def one_hot(node, ids, ctx):
    return tf.one_hot(ids, node.attrs["depth"], dtype=tf_dtype(node.attrs["dtype"]))


KERNELS = {"softmax": softmax, "log_softmax": log_softmax,
           "sparse_softmax_cross_entropy": sparse_softmax_cross_entropy,
           "softmax_cross_entropy": softmax_cross_entropy, "sigmoid_cross_entropy": sigmoid_cross_entropy,
           "dropout": dropout, "gaussian_noise": gaussian_noise, "one_hot": one_hot}
