"""reshape, transpose, concat, pad, SBP constraints (identity on values): ``flowlayers/ops/shape.py``."""
import jax.numpy as jnp

from flowlayers.backend_common import reshaped


def reshape(node, x, ctx):
    return jnp.reshape(x, reshaped(node))


def transpose(node, x, ctx):
    return jnp.transpose(x, node.attrs["perm"])


def concat(node, *xs, ctx):
    return jnp.concatenate(xs, axis=node.attrs["axis"])


def pad(node, x, ctx):
    return jnp.pad(x, node.attrs["paddings"])


def sbp_constraint(node, x, ctx):
    return x


KERNELS = {"reshape": reshape, "transpose": transpose, "concat": concat, "pad": pad, "sbp_constraint": sbp_constraint}
