"""softmax, cross-entropies, dropout, gaussian noise, one_hot (``flowlayers/ops/nn.py``)."""
import jax
import jax.numpy as jnp

from ..dtypes import array_dtype


def softmax(node, x, ctx):
    return jax.nn.softmax(x, axis=node.attrs["axis"])


def log_softmax(node, x, ctx):
    return jax.nn.log_softmax(x, axis=node.attrs["axis"])


def sparse_softmax_cross_entropy(node, labels, logits, ctx):
    """``logsumexp(logits) - logits[label]`` (logsumexp shifts by the max: stable for large logits)."""
    label_logit = jnp.take_along_axis(logits, labels[..., None], axis=-1)[..., 0]
    return jax.nn.logsumexp(logits, axis=-1) - label_logit


def softmax_cross_entropy(node, labels, logits, ctx):
    return -jnp.sum(labels * jax.nn.log_softmax(logits, axis=-1), axis=-1)


def sigmoid_cross_entropy(node, labels, logits, ctx):
    # TF's stable form: max(x, 0) - x * z + log(1 + exp(-|x|))
    x, z = logits, labels
    return jnp.where(x >= 0, x, 0.0) - x * z + jnp.log1p(jnp.exp(jnp.where(x >= 0, -x, x)))


def dropout(node, x, ctx):
    rate = node.attrs["rate"]
    if not ctx.training(node.attrs["training"]) or rate == 0.0:
        return x
    noise_shape = node.attrs.get("noise_shape")      # Keras': 1 where one draw serves a whole dim
    shape = x.shape if noise_shape is None else [n if d is None else d for n, d in zip(x.shape, noise_shape)]
    keep = ctx.random_uniform(shape, node.name, node.attrs.get("seed")) >= rate
    return jnp.where(keep, x / (1.0 - rate), jnp.zeros_like(x))


def gaussian_noise(node, x, ctx):
    """N(0, 1) by Box-Muller from two uniform draws (the step's seeded uniforms: reruns repeat them)."""
    a = node.attrs
    if not ctx.training(a["training"]) or a["stddev"] == 0.0:
        return x
    u1, u2 = (ctx.random_uniform(x.shape, f"{node.name}:{i}", a["seed"]) for i in (1, 2))
    z = jnp.sqrt(-2.0 * jnp.log(1.0 - u1)) * jnp.cos(2.0 * jnp.pi * u2)
    noise = z.astype(x.dtype) * a["stddev"]
    return x * (1.0 + noise) if a["multiplicative"] else x + noise


def one_hot(node, ids, ctx):
    return jax.nn.one_hot(ids, node.attrs["depth"], dtype=array_dtype(node.attrs["dtype"]))


KERNELS = {"softmax": softmax, "log_softmax": log_softmax,
           "sparse_softmax_cross_entropy": sparse_softmax_cross_entropy,
           "softmax_cross_entropy": softmax_cross_entropy, "sigmoid_cross_entropy": sigmoid_cross_entropy,
           "dropout": dropout, "gaussian_noise": gaussian_noise, "one_hot": one_hot}
