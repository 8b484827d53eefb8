"""Random image augmentation, Keras' definitions: a flip, a contrast change and an affine transform (rotation, zoom
or translation) drawn per example while training, the identity otherwise.  Draws are dropout's (seeded by seed,
op, step and replica: reruns repeat them); images are NHWC or NCHW.

An affine transform maps each output pixel (x, y) to the input point (a0 x + a1 y + a2, b0 x + b1 y + b2), read by
'bilinear' or 'nearest' interpolation; a point outside the image is found by ``fill_mode``: 'reflect'
(d c b a | a b c d | d c b a), 'wrap' (a b c d | a b c d), 'nearest' (the edge pixel) or 'constant'
(``fill_value``).
"""
from ..errors import DTypeError, LayerError, ShapeError, describe_shape
from ..framework.graph import apply
from ..framework.op_def import OpDef
from . import rules
from .conv import channel_axis, standardize_data_format

FILL_MODES = ("reflect", "wrap", "constant", "nearest")
INTERPOLATIONS = ("bilinear", "nearest")
AFFINE_KINDS = ("rotation", "zoom", "translation")


def _infer(inputs, attrs):
    (x,) = inputs
    if x.ndim != 4 or None in x.shape[1:]:
        raise ShapeError(f"expected a batch of images of known size (rank 4, {attrs['data_format']}), received "
                         f"shape {describe_shape(x.shape)}")
    if not x.dtype.is_floating:
        raise DTypeError(f"expected floating images, received dtype {x.dtype}")
    return [(x.shape, x.dtype)]


def _signatures(inputs, attrs):
    """Examples drawn and transformed alike wherever they are: split by batch, or by channel (every channel of an
    example shares its draw)."""
    return rules.batch_only(inputs, attrs, keep_axes=(0, channel_axis(attrs["data_format"])))


RANDOM_FLIP = OpDef("random_flip", _infer, _signatures)
RANDOM_CONTRAST = OpDef("random_contrast", _infer, _signatures)
RANDOM_AFFINE = OpDef("random_affine", _infer, _signatures)


def random_flip(x, horizontal, vertical, data_format="NHWC", training=None, seed=None, name=None):
    """With probability 1/2 per example, the image flipped left-right (``horizontal``) and/or upside down
    (``vertical``), both by one draw."""
    attrs = {"horizontal": bool(horizontal), "vertical": bool(vertical), "training": training, "seed": seed,
             "data_format": standardize_data_format(data_format, name or "random_flip")}
    return apply(RANDOM_FLIP, [x], attrs, name)


def random_contrast(x, lower, upper, value_range=(0.0, 255.0), data_format="NHWC", training=None, seed=None,
                    name=None):
    """Per example a factor f from U(1 - lower, 1 + upper): ``(x - mean) * f + mean`` (the mean of each channel of
    the image), clipped to ``value_range``."""
    attrs = {"lower": float(lower), "upper": float(upper), "value_range": tuple(float(v) for v in value_range),
             "training": training, "seed": seed,
             "data_format": standardize_data_format(data_format, name or "random_contrast")}
    return apply(RANDOM_CONTRAST, [x], attrs, name)


def random_affine(x, kind, factors, fill_mode="reflect", interpolation="bilinear", fill_value=0.0,
                  data_format="NHWC", training=None, seed=None, name=None):
    """Per example, an affine transform of ``kind``, its parameters from U(lower, upper) by ``factors``:

    - 'rotation', ``(lower, upper)``: an angle of ``360 * U`` degrees about the image's centre;
    - 'zoom', ``(h_lower, h_upper, w_lower, w_upper)``: the image scaled by ``1 + U`` about its centre along H and
      along W (``w_lower`` None: W as H, one draw);
    - 'translation', ``(h_lower, h_upper, w_lower, w_upper)``: moved by ``U * H`` rows and ``U * W`` columns.
    """
    what = name or "random_affine"
    if kind not in AFFINE_KINDS or len(factors) != (2 if kind == "rotation" else 4):
        raise LayerError(f"{what}: expected kind one of {list(AFFINE_KINDS)} with its factors, received {kind!r} "
                         f"and {factors!r}")
    if fill_mode not in FILL_MODES or interpolation not in INTERPOLATIONS:
        raise LayerError(f"{what}: expected fill_mode one of {list(FILL_MODES)} and interpolation one of "
                         f"{list(INTERPOLATIONS)}, received {fill_mode!r} and {interpolation!r}")
    attrs = {"kind": kind, "factors": tuple(None if f is None else float(f) for f in factors),
             "fill_mode": fill_mode, "interpolation": interpolation, "fill_value": float(fill_value),
             "training": training, "seed": seed, "data_format": standardize_data_format(data_format, what)}
    return apply(RANDOM_AFFINE, [x], attrs, name)
