"""dot_product_attention (``flowlayers/ops/attention.py``) by ``jax.nn.dot_product_attention``: cuDNN's flash
attention where it applies (a GPU, float16 or bfloat16, shapes it takes), else XLA's form, as Keras' jax backend
picks.  ``flash_attention``: None tries cuDNN on a GPU and falls back to XLA where cuDNN refuses the inputs; True
requires cuDNN (a named error where it cannot run); False keeps to XLA.  A value depth other than the key's (which
``jax.nn`` does not take) is computed by the same formula here: logits and softmax in float32 at least, the
probabilities cast back to the value's dtype, as both of JAX's implementations do."""
import jax
import jax.numpy as jnp

from flowlayers.errors import EngineError

CUDNN_REFUSALS = (RuntimeError, ValueError, NotImplementedError, TypeError)


def dot_product_attention(node, q, k, v, *rest, ctx):
    a = node.attrs
    rest = list(rest)
    bias = rest.pop(0) if a["has_bias"] else None
    mask = rest[0] if a["has_mask"] else None
    t, s = q.shape[1], k.shape[1]
    bias, mask = (None if x is None else jnp.broadcast_to(x, x.shape[:2] + (t, s)) for x in (bias, mask))
    args = (q, k, v, bias, mask, a["scale"], a["is_causal"])
    if v.shape[-1] != k.shape[-1]:
        if a["flash_attention"]:
            raise _refused(node, f"a value depth ({v.shape[-1]}) other than the key's ({k.shape[-1]})")
        return _plain(*args)
    if a["flash_attention"] is False or (a["flash_attention"] is None and jax.default_backend() != "gpu"):
        return _fused(*args, "xla")
    try:
        return _fused(*args, "cudnn")
    except CUDNN_REFUSALS as e:
        if a["flash_attention"]:
            raise _refused(node, str(e).rstrip(".")) from e
    return _fused(*args, "xla")


def _fused(q, k, v, bias, mask, scale, is_causal, implementation):
    return jax.nn.dot_product_attention(q, k, v, bias, mask, scale=scale, is_causal=is_causal,
                                        implementation=implementation)


def _plain(q, k, v, bias, mask, scale, is_causal):
    """The formula, for inputs ``jax.nn`` does not take: the key's heads repeated over their query groups."""
    group = q.shape[2] // k.shape[2]
    k, v = jnp.repeat(k, group, axis=2), jnp.repeat(v, group, axis=2)
    logits = jnp.einsum("btnh,bsnh->bnts", q, k, preferred_element_type=jnp.promote_types(q.dtype, jnp.float32))
    logits = logits * scale + (0 if bias is None else bias.astype(logits.dtype))
    keep = jnp.ones(logits.shape[2:], bool) if mask is None else mask
    if is_causal:
        keep = keep & jnp.tril(jnp.ones(logits.shape[2:], bool))
    logits = jnp.where(keep, logits, -0.7 * jnp.finfo(logits.dtype).max)
    probs = jax.nn.softmax(logits.astype(jnp.promote_types(logits.dtype, jnp.float32)), axis=-1)
    return jnp.einsum("bnts,bsnh->btnh", probs.astype(v.dtype), v)


def _refused(node, why):
    who = f"layer {node.layer.name!r}" if node.layer else f"op {node.name!r}"
    return EngineError(f"{who}: dot_product_attention(flash_attention=True) expected cuDNN's flash attention to run "
                       f"here (a GPU with cuDNN, float16 or bfloat16 inputs), received {why}; pass "
                       f"flash_attention=None to let JAX fall back to XLA, or False")


KERNELS = {"dot_product_attention": dot_product_attention}
