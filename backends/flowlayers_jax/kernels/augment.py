"""random_flip, random_contrast, random_affine (``flowlayers/ops/augment.py``): per-example draws from the step's
seeded uniforms, so reruns repeat them; the identity unless training.

The affine transform reads each output pixel's input point as TF's ImageProjectiveTransformV3 does (Keras' on
TensorFlow): the point is first brought into the image by the fill mode, then interpolated; a pixel read outside
the image (in 'constant' mode) is ``fill_value``.  Pixels are read by one gather per corner, batched by example.
"""
import jax.numpy as jnp

from flowlayers.backend_common import into_image


def _draw(node, ctx, n, k, lower, upper):
    """Per example, draw ``k`` of U(lower, upper): shape (n,)."""
    return lower + (upper - lower) * ctx.random_uniform((n,), f"{node.name}:{k}", node.attrs["seed"])


def _spatial(fmt):
    return (2, 3) if fmt == "NCHW" else (1, 2)


def random_flip(node, x, ctx):
    a = node.attrs
    if not ctx.training(a["training"]):
        return x
    flip = jnp.reshape(_draw(node, ctx, x.shape[0], 0, 0.0, 1.0) <= 0.5, (-1, 1, 1, 1))
    h_axis, w_axis = _spatial(a["data_format"])
    if a["horizontal"]:
        x = jnp.where(flip, jnp.flip(x, w_axis), x)
    if a["vertical"]:
        x = jnp.where(flip, jnp.flip(x, h_axis), x)
    return x


def random_contrast(node, x, ctx):
    a = node.attrs
    if not ctx.training(a["training"]):
        return x
    factor = jnp.reshape(_draw(node, ctx, x.shape[0], 0, 1.0 - a["lower"], 1.0 + a["upper"]), (-1, 1, 1, 1))
    mean = jnp.mean(x, axis=_spatial(a["data_format"]), keepdims=True)
    low, high = a["value_range"]
    return jnp.clip((x - mean) * factor.astype(x.dtype) + mean, low, high)


def _parameters(node, ctx, n, height, width):
    """Per example, (a0, a1, a2, b0, b1, b2): output pixel (x, y) -> input point (a0 x + a1 y + a2, b0 x + ...)."""
    a, f = node.attrs, node.attrs["factors"]
    ones, zeros = jnp.ones((n,)), jnp.zeros((n,))
    if a["kind"] == "rotation":
        angle = jnp.deg2rad(_draw(node, ctx, n, 0, f[0] * 360.0, f[1] * 360.0))
        cx, cy, cos, sin = (width - 1) / 2.0, (height - 1) / 2.0, jnp.cos(angle), jnp.sin(angle)
        return cos, -sin, cx - cx * cos + cy * sin, sin, cos, cy - cx * sin - cy * cos
    if a["kind"] == "zoom":
        zh = _draw(node, ctx, n, 0, 1.0 + f[0], 1.0 + f[1])
        zw = zh if f[2] is None else _draw(node, ctx, n, 1, 1.0 + f[2], 1.0 + f[3])
        return zw, zeros, (width - 1) / 2.0 * (1.0 - zw), zeros, zh, (height - 1) / 2.0 * (1.0 - zh)
    ty = _draw(node, ctx, n, 0, f[0], f[1]) * height
    tx = _draw(node, ctx, n, 1, f[2], f[3]) * width
    return ones, zeros, -tx, zeros, ones, -ty


def _read(flat, rows, cols, height, width, fill):
    """``flat`` (N, H * W, C) at integer points (N, H, W): the pixels, ``fill`` outside the image."""
    inside = (rows >= 0) & (rows < height) & (cols >= 0) & (cols < width)
    index = jnp.clip(rows, 0, height - 1) * width + jnp.clip(cols, 0, width - 1)
    n = index.shape[0]
    values = jnp.take_along_axis(flat, jnp.reshape(index, (n, -1, 1)), axis=1)
    return jnp.where(jnp.reshape(inside, (n, -1, 1)), values, jnp.asarray(fill, flat.dtype))


def _sample(images, params, interpolation, fill_mode, fill):
    n, height, width, channels = images.shape
    a0, a1, a2, b0, b1, b2 = (jnp.reshape(p, (-1, 1, 1)) for p in params)
    ys, xs = jnp.meshgrid(jnp.arange(height, dtype=jnp.float32), jnp.arange(width, dtype=jnp.float32),
                          indexing="ij")
    sx = into_image(jnp, a0 * xs + a1 * ys + a2, width, fill_mode)
    sy = into_image(jnp, b0 * xs + b1 * ys + b2, height, fill_mode)
    flat = jnp.reshape(images, (n, height * width, channels))
    if interpolation == "nearest":      # rounded half away from zero, as std::round
        rows, cols = (jnp.sign(c) * jnp.floor(jnp.abs(c) + 0.5) for c in (sy, sx))
        out = _read(flat, rows.astype(jnp.int32), cols.astype(jnp.int32), height, width, fill)
    else:
        y0, x0 = jnp.floor(sy), jnp.floor(sx)
        wy, wx = (jnp.reshape(w, (n, -1, 1)).astype(images.dtype) for w in (sy - y0, sx - x0))
        r0, c0 = y0.astype(jnp.int32), x0.astype(jnp.int32)
        top = (1 - wx) * _read(flat, r0, c0, height, width, fill) + wx * _read(flat, r0, c0 + 1, height, width, fill)
        bottom = ((1 - wx) * _read(flat, r0 + 1, c0, height, width, fill)
                  + wx * _read(flat, r0 + 1, c0 + 1, height, width, fill))
        out = (1 - wy) * top + wy * bottom
    return jnp.reshape(out, images.shape)


def random_affine(node, x, ctx):
    a = node.attrs
    if not ctx.training(a["training"]):
        return x
    images = jnp.transpose(x, (0, 2, 3, 1)) if a["data_format"] == "NCHW" else x
    params = _parameters(node, ctx, images.shape[0], images.shape[1], images.shape[2])
    out = _sample(images, params, a["interpolation"], a["fill_mode"], a["fill_value"])
    return jnp.transpose(out, (0, 3, 1, 2)) if a["data_format"] == "NCHW" else out


KERNELS = {"random_flip": random_flip, "random_contrast": random_contrast, "random_affine": random_affine}
