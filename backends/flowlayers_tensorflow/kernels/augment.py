"""random_flip, random_contrast, random_affine (``flowlayers/ops/augment.py``): per-example draws from the step's
seeded uniforms, so reruns repeat them; the identity unless training.

The affine transform reads each output pixel's input point as TF's ImageProjectiveTransformV3 does (Keras' on
TensorFlow): the point is first brought into the image by the fill mode, then interpolated from pixels gathered per
example, ``fill_value`` outside the image.  Written out, not that op: DTensor (TF 2.21) has no layout rule for it,
and its registered gradient transforms the output gradient back by the inverse transform, which is not the
gradient of the interpolation (the views' gradients would part).
"""
import math
import types

import numpy as np
import tensorflow as tf

from flowlayers.backend_common import into_image

# what backend_common.into_image asks of an array namespace, in TensorFlow's names
_TF = types.SimpleNamespace(zeros_like=tf.zeros_like, mod=tf.math.floormod, where=tf.where, floor=tf.floor,
                            clip=tf.clip_by_value)


def _draw(node, ctx, x, k, lower, upper):
    """Per example of ``x``, draw ``k`` of U(lower, upper): shape (N,)."""
    u = ctx.random_uniform(tf.shape(x)[:1], f"{node.name}:{k}", node.attrs["seed"])
    return lower + (upper - lower) * u


def _spatial(fmt):
    return (2, 3) if fmt == "NCHW" else (1, 2)


def random_flip(node, x, ctx):
    a = node.attrs
    if not ctx.training(a["training"]):
        return tf.identity(x)
    flip = tf.reshape(_draw(node, ctx, x, 0, 0.0, 1.0) <= 0.5, (-1, 1, 1, 1))
    h_axis, w_axis = _spatial(a["data_format"])
    if a["horizontal"]:
        x = tf.where(flip, _reversed(x, w_axis, ctx), x)
    if a["vertical"]:
        x = tf.where(flip, _reversed(x, h_axis, ctx), x)
    return x


def _reversed(x, axis, ctx):
    """``x`` reversed along ``axis``, as a gather of the indices backwards (DTensor has no layout rule for
    ReverseV2)."""
    backwards = ctx.constant(np.arange(x.shape[axis] - 1, -1, -1, dtype=np.int32), tf.int32)
    return tf.gather(x, backwards, axis=axis)


def random_contrast(node, x, ctx):
    a = node.attrs
    if not ctx.training(a["training"]):
        return tf.identity(x)
    factor = tf.cast(tf.reshape(_draw(node, ctx, x, 0, 1.0 - a["lower"], 1.0 + a["upper"]), (-1, 1, 1, 1)), x.dtype)
    mean = tf.reduce_mean(x, axis=_spatial(a["data_format"]), keepdims=True)
    low, high = a["value_range"]
    return tf.clip_by_value((x - mean) * factor + mean, low, high)


def transforms(node, ctx, x, height, width):
    """(N, 8) projective transforms, output pixel -> input point, of the op's kind."""
    a, f = node.attrs, node.attrs["factors"]
    if a["kind"] == "rotation":
        angle = _draw(node, ctx, x, 0, f[0] * 360.0, f[1] * 360.0) * (math.pi / 180.0)
        cx, cy, cos, sin = (width - 1) / 2.0, (height - 1) / 2.0, tf.cos(angle), tf.sin(angle)
        rows = [cos, -sin, cx - cx * cos + cy * sin, sin, cos, cy - cx * sin - cy * cos]
    elif a["kind"] == "zoom":
        zh = _draw(node, ctx, x, 0, 1.0 + f[0], 1.0 + f[1])
        zw = zh if f[2] is None else _draw(node, ctx, x, 1, 1.0 + f[2], 1.0 + f[3])
        rows = [zw, zw * 0.0, (width - 1) / 2.0 * (1.0 - zw), zh * 0.0, zh, (height - 1) / 2.0 * (1.0 - zh)]
    else:
        ty = _draw(node, ctx, x, 0, f[0], f[1]) * height
        tx = _draw(node, ctx, x, 1, f[2], f[3]) * width
        rows = [tx * 0.0 + 1.0, tx * 0.0, -tx, ty * 0.0, ty * 0.0 + 1.0, -ty]
    zeros = rows[0] * 0.0       # made from the draws: in the consistent view, laid out as they are
    return tf.stack(rows + [zeros, zeros], axis=1)


def _read(flat, rows, cols, height, width, fill):
    """``flat`` (N, H * W, C) at integer points (N, H * W): the pixels, ``fill`` outside the image."""
    inside = (rows >= 0) & (rows < height) & (cols >= 0) & (cols < width)
    index = tf.clip_by_value(rows, 0, height - 1) * width + tf.clip_by_value(cols, 0, width - 1)
    values = tf.gather(flat, index, batch_dims=1)
    return tf.where(inside[..., None], values, tf.cast(fill, flat.dtype))


def _sample(images, transforms, interpolation, fill_mode, fill, ctx):
    _, height, width, channels = images.shape
    grid = np.meshgrid(np.arange(height, dtype=np.float32), np.arange(width, dtype=np.float32), indexing="ij")
    ys, xs = (ctx.constant(g.reshape(1, -1), tf.float32) for g in grid)
    a0, a1, a2, b0, b1, b2 = (transforms[:, i:i + 1] for i in range(6))
    sx = into_image(_TF, a0 * xs + a1 * ys + a2, width, fill_mode)      # (N, H * W)
    sy = into_image(_TF, b0 * xs + b1 * ys + b2, height, fill_mode)
    flat = tf.reshape(images, (-1, height * width, channels))
    if interpolation == "nearest":      # rounded half away from zero, as std::round
        rows, cols = (tf.cast(tf.sign(c) * tf.floor(tf.abs(c) + 0.5), tf.int32) for c in (sy, sx))
        out = _read(flat, rows, cols, height, width, fill)
    else:
        y0, x0 = tf.floor(sy), tf.floor(sx)
        wy, wx = (tf.cast(w, images.dtype)[..., None] for w in (sy - y0, sx - x0))
        r0, c0 = tf.cast(y0, tf.int32), tf.cast(x0, tf.int32)
        top = (1 - wx) * _read(flat, r0, c0, height, width, fill) + wx * _read(flat, r0, c0 + 1, height, width, fill)
        bottom = ((1 - wx) * _read(flat, r0 + 1, c0, height, width, fill)
                  + wx * _read(flat, r0 + 1, c0 + 1, height, width, fill))
        out = (1 - wy) * top + wy * bottom
    return tf.reshape(out, (-1, height, width, channels))


def random_affine(node, x, ctx):
    a = node.attrs
    if not ctx.training(a["training"]):
        return tf.identity(x)
    images = tf.transpose(x, (0, 2, 3, 1)) if a["data_format"] == "NCHW" else x
    height, width = images.shape[1], images.shape[2]
    out = _sample(images, transforms(node, ctx, x, height, width), a["interpolation"], a["fill_mode"],
                  a["fill_value"], ctx)
    return tf.transpose(out, (0, 3, 1, 2)) if a["data_format"] == "NCHW" else out


KERNELS = {"random_flip": random_flip, "random_contrast": random_contrast, "random_affine": random_affine}
