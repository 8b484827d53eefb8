"""dot_product_attention: ``softmax(q k^T * scale + bias, masked) v`` as ONE op, which each engine lowers to its
fused kernel (jax: ``jax.nn.dot_product_attention``, cuDNN's flash attention where it applies on a GPU; tensorflow,
which has none: one kernel of TF ops).

Inputs, in order: query ``(B, T, N, H)``, key ``(B, S, K, H)``, value ``(B, S, K, Hv)`` (``K`` divides ``N``:
grouped-query heads, query head ``n`` reads key head ``n // (N / K)``), then the bias and the mask where given, each
of rank 4 and broadcasting to ``(B, N, T, S)`` (``flow.ops.dot_product_attention`` gives a lower rank its leading
dims).  The mask is boolean, True where a query may attend; ``is_causal`` also hides every later key.

Per mesh axis: the batch split (``S(0)`` on every input whose first dim is the batch's, ``B`` where it is 1) gives
``S(0)``; the heads split (query, key and value ``S(2)``, a bias or mask holding the heads ``S(1)``, else ``B``) gives
``S(2)``, the heads being contiguous in their groups; all broadcast gives broadcast.  Anything else is boxed to one
of these, as for every op.
"""
from .. import dtypes
from ..errors import DTypeError, GraphError, ShapeError, describe_shape
from ..framework.graph import apply
from ..framework.op_def import OpDef, Signature
from ..sbp import Split as S, broadcast as B

WHAT = "dot_product_attention"


def _extras(inputs, attrs):
    """The bias and the mask among the inputs, each None where not given."""
    rest = list(inputs[3:])
    bias = rest.pop(0) if attrs["has_bias"] else None
    return bias, (rest[0] if attrs["has_mask"] else None)


def _check_qkv(q, k, v):
    for name, t in (("query", q), ("key", k), ("value", v)):
        if t.ndim != 4:
            raise ShapeError(f"{WHAT}: expected a 4-D {name} (batch, time, heads, depth), received shape "
                             f"{describe_shape(t.shape)}")
    if len({q.dtype, k.dtype, v.dtype}) != 1 or not q.dtype.is_floating:
        raise DTypeError(f"{WHAT}: expected a floating query, key and value of one dtype, received {q.dtype}, "
                         f"{k.dtype} and {v.dtype}")
    if k.shape[:3] != v.shape[:3] or q.shape[3] != k.shape[3] or q.shape[0] != k.shape[0]:
        raise ShapeError(f"{WHAT}: expected query (B, T, N, H), key (B, S, K, H) and value (B, S, K, Hv), received "
                         f"{describe_shape(q.shape)}, {describe_shape(k.shape)} and {describe_shape(v.shape)}")
    if q.shape[2] % k.shape[2]:
        raise ShapeError(f"{WHAT}: expected the key's heads ({k.shape[2]}) to divide the query's ({q.shape[2]})")


def _check_broadcast(name, t, target):
    if t.ndim != 4 or any(d not in (1, None, want) and want is not None for d, want in zip(t.shape, target)):
        raise ShapeError(f"{WHAT}: expected a {name} of rank 4 broadcasting to (batch, heads, query time, key time) "
                         f"{describe_shape(target)}, received shape {describe_shape(t.shape)}")


def _infer(inputs, attrs):
    q, k, v = inputs[:3]
    _check_qkv(q, k, v)
    bias, mask = _extras(inputs, attrs)
    if attrs["is_causal"] and (q.shape[1] is None or k.shape[1] is None):
        raise ShapeError(f"{WHAT}: is_causal expected known query and key lengths, received query "
                         f"{describe_shape(q.shape)} and key {describe_shape(k.shape)}")
    target = (q.shape[0], q.shape[2], q.shape[1], k.shape[1])
    if bias is not None:
        _check_broadcast("bias", bias, target)
        if bias.dtype != q.dtype:
            raise DTypeError(f"{WHAT}: expected a bias of the query's dtype {q.dtype}, received {bias.dtype}")
    if mask is not None:
        _check_broadcast("mask", mask, target)
        if mask.dtype != dtypes.bool_:
            raise DTypeError(f"{WHAT}: expected a bool mask (True: attend), received dtype {mask.dtype}")
    return [((q.shape[0], q.shape[1], q.shape[2], v.shape[3]), q.dtype)]


def _signatures(inputs, attrs):
    extra = inputs[3:]
    batch = (S(0),) * 3 + tuple(S(0) if t.shape[0] != 1 else B for t in extra)
    heads = (S(2),) * 3 + tuple(S(1) if t.shape[1] != 1 else B for t in extra)
    return [Signature(batch, (S(0),)), Signature(heads, (S(2),)), Signature((B,) * len(inputs), (B,))]


DOT_PRODUCT_ATTENTION = OpDef(WHAT, _infer, _signatures)


def dot_product_attention(query, key, value, bias=None, mask=None, scale=1.0, is_causal=False, flash_attention=None,
                          name=None):
    """The op on Blobs: ``bias`` and ``mask`` of rank 4 (or None), ``scale`` a float.  ``flash_attention``, as
    Keras means it: None lets the engine pick its fastest kernel, True requires a flash kernel (an engine or device
    without one refuses the step by name), False keeps to the engine's plain (XLA or TF) form."""
    if flash_attention is not None and not isinstance(flash_attention, bool):
        raise GraphError(f"{WHAT}: flash_attention expected None, True or False, received {flash_attention!r}")
    inputs = [query, key, value] + [t for t in (bias, mask) if t is not None]
    attrs = {"scale": float(scale), "is_causal": bool(is_causal), "flash_attention": flash_attention,
             "has_bias": bias is not None, "has_mask": mask is not None}
    return apply(DOT_PRODUCT_ATTENTION, inputs, attrs, name)
