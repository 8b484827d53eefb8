"""Layout-rule presets: Megatron-style tensor parallelism written against Keras' variable names, and ZeRO-style
sharding of weights and optimizer state over the ``data`` axis.

    flow.config.set_mesh(data=2, model=2)
    flow.config.set_layout_rules(flow.parallel.attention_rules())

Each attention layer's heads are split over ``axis``: the query, key and value kernels
``(model_dim, heads, key_dim)`` along their heads dim, the output kernel ``(heads, value_dim, out)`` along its
first, so a block's forward pass needs one all-reduce (the output projection's partial sum) and its heads never
leave their device.  The rules are plain ``{regex: spec}`` entries; write your own the same way.

    flow.config.set_layout_rules(flow.parallel.zero_rules(model, rules=flow.parallel.attention_rules()))

``zero_rules`` splits each weight of a model over ``data`` along its first dim that divides (ZeRO stage 3: the
optimizer's slots follow their weights): each device stores 1/N, the forward pass all-gathers a weight where it
is used, the backward pass reduce-scatters its gradient.  Given tensor parallelism's rules, it adds ``data`` to
their splits.
"""
import re

from .. import settings
from ..errors import SBPError


def attention_rules(layers=".*", axis="model"):
    """Rules splitting the heads of the MultiHeadAttention layers whose names match ``layers`` over ``axis``."""
    _check("attention_rules", layers=layers, axis=axis)
    return {f"(^|/)({layers})/(query|key|value)/kernel$": (None, axis, None),
            f"(^|/)({layers})/(query|key|value)/bias$": (axis, None),
            f"(^|/)({layers})/attention_output/kernel$": (axis, None, None)}


def vocab_rules(embedding="token_embedding", head="lm_head", axis="model"):
    """Rules splitting the vocabulary over ``axis``: the rows of the Embedding layers named ``embedding`` and the
    columns of the Dense head named ``head``.  For a ReversibleEmbedding head: ``head=None`` when it is tied
    (the table serves both ways), ``head=embedding`` when it is not (its ``reverse_embeddings`` split too).  The lookup is then a
    partial sum (one all-reduce), the logits stay split by vocabulary and the softmax cross-entropy reduces each
    row's max, sum and label logit over the devices (three all-reduces of one number per token) instead of
    gathering the logits."""
    _check("vocab_rules", embedding=embedding, axis=axis, **({} if head is None else {"head": head}))
    rules = {f"(^|/)({embedding})/embeddings$": (axis, None)}
    if head == embedding:
        rules[f"(^|/)({embedding})/reverse_embeddings$"] = (None, axis)
    elif head is not None:
        rules.update({f"(^|/)({head})/kernel$": (None, axis), f"(^|/)({head})/bias$": (axis,)})
    return rules


def _check(preset, **patterns):
    for what, value in patterns.items():
        if not isinstance(value, str) or not value:
            raise SBPError(f"flow.parallel.{preset}: {what} expected a non-empty string, received {value!r}")
        try:
            re.compile(value)
        except re.error as e:
            raise SBPError(f"flow.parallel.{preset}: {what} expected a regular expression, received {value!r} "
                           f"({e})") from None


def zero_rules(model, axis="data", rules=None):
    """Rules splitting every weight of ``model`` over mesh axis ``axis`` (of the mesh in force) along its first
    dim of a size that divides; a weight with none stays whole.  ``rules`` (e.g. tensor parallelism's): each
    weight keeps the spec of the first of them that matches it, with ``axis`` added on a further dim, so that
    ``set_layout_rules(zero_rules(model, rules=tp))`` shards over both axes."""
    mesh = settings.mesh_shape()
    if axis not in mesh:
        raise SBPError(f"flow.parallel.zero_rules: axis expected one of the mesh axes {list(mesh)}, received {axis!r}; "
                       f"call flow.config.set_mesh(...) first")
    weights = getattr(model, "weights", None)
    if weights is None:
        raise SBPError(f"flow.parallel.zero_rules: expected a built model (its weights), received {model!r}")
    if rules is not None and not isinstance(rules, dict):
        raise SBPError(f"flow.parallel.zero_rules: rules expected a dict of layout rules, received {rules!r}")
    out = {}
    for w in weights:
        spec = next((tuple(spec) for pattern, spec in (rules or {}).items() if re.search(pattern, w.path)),
                    (None,) * len(w.shape))
        if len(spec) != len(w.shape):
            raise SBPError(f"flow.parallel.zero_rules: layout rule for {w.path!r} expected {len(w.shape)} entries, "
                           f"one per dim of shape {w.shape}, received {spec!r}")
        sizes = [n // (mesh.get(a, 1) if a else 1) for n, a in zip(w.shape, spec)]
        dim = next((d for d, (size, a) in enumerate(zip(sizes, spec)) if a is None and size % mesh[axis] == 0), None)
        if dim is not None or any(spec):
            out[f"^{re.escape(w.path)}$"] = tuple(axis if d == dim else a for d, a in enumerate(spec))
    return out
