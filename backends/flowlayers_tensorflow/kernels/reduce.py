"""Reductions."""
import tensorflow as tf


def _reduce(fn):
    def kernel(node, x, ctx):
        return fn(x, axis=list(node.attrs["axes"]), keepdims=node.attrs["keepdims"])
    return kernel


def inclusive_product(x, axis):
    """Products along ``axis`` up to each position, by doubling shifts (Hillis-Steele): slices, concats and
    multiplies only, which DTensor lays out and differentiates (tf.math.cumprod, which tf.reduce_prod's gradient
    also uses, has no DTensor layout rule)."""
    n, shift = x.shape[axis], 1
    if n is None:           # a size known only when the step runs: TF's own op
        return tf.math.cumprod(x, axis=axis)
    while shift < n:
        head = (slice(None),) * axis
        before = tf.concat([tf.ones_like(x[head + (slice(0, shift),)]), x[head + (slice(0, n - shift),)]], axis)
        x, shift = x * before, shift * 2
    return x


def reduce_prod(node, x, ctx):
    axes, head = node.attrs["axes"], (slice(None),)
    if any(x.shape[a] is None for a in axes):
        return tf.reduce_prod(x, axis=list(axes), keepdims=node.attrs["keepdims"])
    for a in axes:
        x = inclusive_product(x, a)[head * a + (slice(x.shape[a] - 1, None),)]
    return x if node.attrs["keepdims"] else tf.squeeze(x, axes)


def argmax(node, x, ctx):
    return tf.argmax(x, axis=node.attrs["axes"][0], output_type=tf.int64)


def argmin(node, x, ctx):
    # the first largest of -x: DTensor has no layout rule for tf.argmin
    x = tf.cast(x, tf.int8) if x.dtype == tf.bool else x
    return tf.argmax(-x, axis=node.attrs["axes"][0], output_type=tf.int64)


KERNELS = {"reduce_sum": _reduce(tf.reduce_sum), "reduce_mean": _reduce(tf.reduce_mean),
           "reduce_max": _reduce(tf.reduce_max), "reduce_min": _reduce(tf.reduce_min), "reduce_prod": reduce_prod,
           "reduce_any": _reduce(tf.reduce_any), "reduce_all": _reduce(tf.reduce_all), "argmax": argmax,
           "argmin": argmin}
