"""dot_product_attention (``flowlayers/ops/attention.py``).  TensorFlow has no fused attention kernel, so this one
kernel composes it of TF ops, as Keras' tensorflow backend does: the logits in the inputs' dtype, then in float32 at
least for the scale, bias, mask and softmax, the probabilities cast back to the value's dtype.  Grouped-query key and
value heads are repeated over their query groups.  ``flash_attention=True`` is refused by name, as Keras' tensorflow
backend refuses it; None and False both mean this form."""
import numpy as np
import tensorflow as tf

from flowlayers.errors import EngineError


def dot_product_attention(node, q, k, v, *rest, ctx):
    a = node.attrs
    if a["flash_attention"]:
        who = f"layer {node.layer.name!r}" if node.layer else f"op {node.name!r}"
        raise EngineError(f"{who}: dot_product_attention(flash_attention=True): the tensorflow engine has no flash "
                          f"attention kernel (nor has Keras' tensorflow backend); expected flash_attention None or "
                          f"False, received True, or the jax engine on a GPU")
    rest = list(rest)
    bias = rest.pop(0) if a["has_bias"] else None
    mask = rest[0] if a["has_mask"] else None
    group = q.shape[2] // k.shape[2]
    if group > 1:
        k, v = tf.repeat(k, group, axis=2), tf.repeat(v, group, axis=2)
    logits = tf.einsum("btnh,bsnh->bnts", q, k)
    wide = tf.float64 if q.dtype == tf.float64 else tf.float32
    logits = tf.cast(logits, wide) * tf.cast(a["scale"], wide)
    if bias is not None:
        logits = logits + tf.cast(bias, wide)
    keep = mask
    if a["is_causal"]:
        t, s = q.shape[1], k.shape[1]
        causal = ctx.constant(np.tril(np.ones((t, s), bool))[None, None], tf.bool)
        keep = causal if keep is None else tf.logical_and(keep, causal)
    if keep is not None:
        logits = tf.where(keep, logits, tf.cast(-0.7 * np.finfo(wide.as_numpy_dtype).max, wide))
    probs = tf.cast(tf.nn.softmax(logits, axis=-1), v.dtype)
    return tf.einsum("bnts,bsnh->btnh", probs, v)


KERNELS = {"dot_product_attention": dot_product_attention}
