"""Layout-rule presets: Megatron-style tensor parallelism written against Keras' variable names.

    flow.config.set_mesh(data=2, model=2)
    flow.config.set_layout_rules(flow.parallel.attention_rules())

Each attention layer's heads are split over ``axis``: the query, key and value kernels
``(model_dim, heads, key_dim)`` along their heads dim, the output kernel ``(heads, value_dim, out)`` along its
first, so a block's forward pass needs one all-reduce (the output projection's partial sum) and its heads never
leave their device.  The rules are plain ``{regex: spec}`` entries; write your own the same way.
"""
import re

from ..errors import SBPError


def attention_rules(layers=".*", axis="model"):
    """Rules splitting the heads of the MultiHeadAttention layers whose names match ``layers`` over ``axis``."""
    for what, value in (("layers", layers), ("axis", axis)):
        if not isinstance(value, str) or not value:
            raise SBPError(f"flow.parallel.attention_rules: {what} expected a non-empty string, received {value!r}")
    try:
        re.compile(layers)
    except re.error as e:
        raise SBPError(f"flow.parallel.attention_rules: layers expected a regular expression, received {layers!r} "
                       f"({e})") from None
    return {f"(^|/)({layers})/(query|key|value)/kernel$": (None, axis, None),
            f"(^|/)({layers})/(query|key|value)/bias$": (axis, None),
            f"(^|/)({layers})/attention_output/kernel$": (axis, None, None)}
