"""Batch and layer normalisation (``flowlayers/ops/norm.py``)."""
import tensorflow as tf


def batch_norm(node, x, gamma, beta, mean, var, ctx):
    a = node.attrs
    axis, rank = a["axis"], len(x.shape)
    shape = [1] * rank
    shape[axis] = -1
    if ctx.training(a["training"]):
        batch_mean, batch_var = tf.nn.moments(x, [i for i in range(rank) if i != axis])
        m = a["momentum"]
        new_mean = mean * m + batch_mean * (1.0 - m)
        new_var = var * m + batch_var * (1.0 - m)
        use_mean, use_var = batch_mean, batch_var
    else:
        new_mean, new_var = tf.identity(mean), tf.identity(var)
        use_mean, use_var = mean, var
    inv = tf.math.rsqrt(tf.reshape(use_var, shape) + a["epsilon"]) * tf.reshape(gamma, shape)
    y = (x - tf.reshape(use_mean, shape)) * inv + tf.reshape(beta, shape)
    return y, new_mean, new_var


def layer_norm(node, x, gamma, beta, ctx):
    axes = list(node.attrs["axes"])
    mean, var = tf.nn.moments(x, axes, keepdims=True)
    shape = [x.shape[i] if i in axes else 1 for i in range(len(x.shape))]
    y = (x - mean) * tf.math.rsqrt(var + node.attrs["epsilon"])
    return y * tf.reshape(gamma, shape) + tf.reshape(beta, shape)


KERNELS = {"batch_norm": batch_norm, "layer_norm": layer_norm}
