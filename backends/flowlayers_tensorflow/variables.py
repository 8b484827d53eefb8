"""Initial values drawn with stateless random ops: the same numbers for a variable path and seed
in every view, device count and mesh."""
import tensorflow as tf

from .dtypes import tf_dtype


def initial_value(var):
    kind, p = var.initializer.sampler(var.shape)
    dtype = tf_dtype(var.dtype)
    sample_dtype = tf.float32 if dtype in (tf.float16, tf.bfloat16) else dtype
    seed = tf.constant(var.seed(), tf.int64)
    if kind == "constant":
        value = tf.fill(var.shape, tf.constant(p["value"], sample_dtype))
    elif kind == "uniform":
        value = tf.random.stateless_uniform(var.shape, seed, p["minval"], p["maxval"], dtype=sample_dtype)
    elif kind == "normal":
        value = tf.random.stateless_normal(var.shape, seed, p["mean"], p["stddev"], dtype=sample_dtype)
    elif kind == "truncated_normal":
        value = tf.random.stateless_truncated_normal(var.shape, seed, p["mean"], p["stddev"], dtype=sample_dtype)
    else:
        raise ValueError(f"variable {var.path!r}: unknown initializer sampler {kind!r}")
    return tf.cast(value, dtype)
