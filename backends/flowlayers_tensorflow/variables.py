"""Initial values drawn with stateless random ops: the same numbers for a variable path and seed
in every view, device count and mesh."""
import tensorflow as tf

from .dtypes import tf_dtype


def initial_value(var):
    return draw(var.initializer.sampler(var.shape), var.shape, var.dtype, tf.constant(var.seed(), tf.int64), var.path)


def draw(sampler, shape, dtype, seed, path):
    """Values of ``sampler`` (an initializer's ``(kind, params)``) for a ``seed`` pair of integers (any numeric
    dtype); with the seed a tensor, one traced draw serves every variable of that initializer, shape and dtype."""
    kind, p = sampler
    seed = tf.cast(seed, tf.int64)
    dtype = tf_dtype(dtype)
    sample_dtype = tf.float32 if dtype in (tf.float16, tf.bfloat16) else dtype
    if kind == "constant":
        value = tf.fill(shape, tf.cast(p["value"], sample_dtype))   # 0.0 fills an int variable too
    elif kind == "uniform":
        value = tf.random.stateless_uniform(shape, seed, p["minval"], p["maxval"], dtype=sample_dtype)
    elif kind == "normal":
        value = tf.random.stateless_normal(shape, seed, p["mean"], p["stddev"], dtype=sample_dtype)
    elif kind == "truncated_normal":
        value = tf.random.stateless_truncated_normal(shape, seed, p["mean"], p["stddev"], dtype=sample_dtype)
    else:
        raise ValueError(f"variable {path!r}: unknown initializer sampler {kind!r}")
    return tf.cast(value, dtype)
