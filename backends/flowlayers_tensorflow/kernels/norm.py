"""Batch and layer normalisation (``flowlayers/ops/norm.py``)."""
from types import SimpleNamespace

import tensorflow as tf

from flowlayers import backend_common


#: ``backend_common.batch_norm`` and ``layer_norm``'s namespace: the normalisations written once, over these
NORM_MATH = SimpleNamespace(
    batch_moments=lambda x, axes, ctx: tf.nn.moments(x, axes),
    moments=lambda x, axes: tf.nn.moments(x, axes, keepdims=True),
    rsqrt=tf.math.rsqrt, reshape=tf.reshape, identity=tf.identity)


def batch_norm(node, x, gamma, beta, mean, var, ctx):
    return backend_common.batch_norm(NORM_MATH, node, x, gamma, beta, mean, var, ctx)


def layer_norm(node, x, gamma, beta, ctx):
    return backend_common.layer_norm(NORM_MATH, node, x, gamma, beta, ctx)


KERNELS = {"batch_norm": batch_norm, "layer_norm": layer_norm}
