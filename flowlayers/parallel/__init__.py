"""The planner: SBP propagation, Boxing and its cost.  Pure Python, no engine."""
from ..errors import SBPError
from ..framework import graph
from ..framework.blob import Blob
from .presets import attention_rules, vocab_rules, zero_rules


def signatures_of(blob):
    """The legal SBP signatures (one mesh axis) of the op that produced ``blob``."""
    node = blob.node
    return list(node.op.signatures(node.inputs, node.attrs))


def force_signature(blob, *per_axis):
    """Make the op that produced ``blob`` use ``per_axis`` signatures (one per mesh axis) instead of the
    cheapest; the planner boxes its inputs to them.  For experiments and tests of the planner itself;
    models normally say what they want with layout rules and ``Blob.with_sbp``."""
    if not isinstance(blob, Blob) or blob.node.op.is_source:
        raise SBPError(f"force_signature: expected a Blob produced by an op, received {blob!r}")
    graph.force_signature(blob.node, per_axis)
    return blob
