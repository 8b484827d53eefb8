"""softmax, cross-entropies, dropout, normalisation."""
import tensorflow as tf


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


def dropout(node, x, ctx):
    rate = node.attrs["rate"]
    if not ctx.training(node.attrs["training"]) or rate == 0.0:
        return tf.identity(x)
    keep = ctx.random_uniform(tf.shape(x), node.name, node.attrs.get("seed")) >= rate
    return tf.where(keep, x / (1.0 - rate), tf.zeros_like(x))


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


KERNELS = {"softmax": softmax, "log_softmax": log_softmax,
           "sparse_softmax_cross_entropy": sparse_softmax_cross_entropy,
           "softmax_cross_entropy": softmax_cross_entropy, "sigmoid_cross_entropy": sigmoid_cross_entropy,
           "dropout": dropout, "batch_norm": batch_norm, "layer_norm": layer_norm}
