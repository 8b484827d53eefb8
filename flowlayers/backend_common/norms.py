"""Batch and layer normalisation's arithmetic, over a backend's namespace."""


def batch_norm(xp, node, x, gamma, beta, mean, var, ctx):
    """The ``batch_norm`` op (Keras' BatchNormalization): (y, new moving mean, new moving variance), written over a
    backend's namespace ``xp``: ``xp.batch_moments(x, axes, ctx)`` (the batch's mean and variance over ``axes``),
    ``xp.rsqrt``, ``xp.reshape`` and ``xp.identity`` (a moving statistic kept as it is, as a new value)."""
    a = node.attrs
    axis, rank = a["axis"], len(x.shape)
    shape = [1] * rank
    shape[axis] = -1
    if ctx.training(a["training"]):
        batch_mean, batch_var = xp.batch_moments(x, [i for i in range(rank) if i != axis], ctx)
        m = a["momentum"]
        new_mean = mean * m + batch_mean * (1.0 - m)
        new_var = var * m + batch_var * (1.0 - m)
        use_mean, use_var = batch_mean, batch_var
    else:
        new_mean, new_var = xp.identity(mean), xp.identity(var)
        use_mean, use_var = mean, var
    inv = xp.rsqrt(xp.reshape(use_var, shape) + a["epsilon"]) * xp.reshape(gamma, shape)
    y = (x - xp.reshape(use_mean, shape)) * inv + xp.reshape(beta, shape)
    return y, new_mean, new_var


def layer_norm(xp, node, x, gamma, beta, ctx):
    """The ``layer_norm`` op (Keras' LayerNormalization) over ``xp`` (``batch_norm``'s, with ``xp.moments(x, axes)``:
    mean and variance over ``axes``, kept as dims of size 1)."""
    axes = list(node.attrs["axes"])
    mean, var = xp.moments(x, axes)
    shape = [x.shape[i] if i in axes else 1 for i in range(len(x.shape))]
    y = (x - mean) * xp.rsqrt(var + node.attrs["epsilon"])
    return y * xp.reshape(gamma, shape) + xp.reshape(beta, shape)
