"""Initial values drawn with stateless random ops: the same numbers for a variable path and seed
in every view, device count and mesh."""
import tensorflow as tf

from .dtypes import tf_dtype


def initial_value(spec):
    """A VariableSpec's initial value, drawn from its sampler and seed."""
    return draw(spec.sampler, spec.shape, spec.dtype, tf.constant(spec.seed, tf.int64), spec.path)


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


class SharedConstants:
    """Initial values of constant initializers (the zeros of every optimizer slot), made once per value, shape,
    dtype and placement and shared by the variables that start from them.  Sharing is safe: TF copies a buffer
    that is still referenced elsewhere before it assigns or updates in place; making one per variable is slow on
    deep models (bench/RESULTS_design.md).  At most ``budget`` bytes are kept."""

    def __init__(self, budget=16 << 20):
        self._values, self._left = {}, budget

    def get(self, spec, placement, make):
        """The initial value of VariableSpec ``spec`` at ``placement`` (any hashable), from ``make()``: made once
        and shared when its initializer is a constant, made anew otherwise."""
        if spec.sampler[0] != "constant":
            return make()
        key = (repr(spec.sampler), spec.shape, spec.dtype.name, placement)
        if key in self._values:
            return self._values[key]
        value = make()
        size = value.shape.num_elements() * value.dtype.size
        if size <= self._left:
            self._values[key], self._left = value, self._left - size
        return value
