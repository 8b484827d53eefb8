"""SBP values: how one logical tensor lies over one mesh axis.

They are tiny frozen values that print as OneFlow writes them::

    >>> split(0), broadcast, partial_sum
    (S(0), B, P)

An nd-SBP is a tuple with one value per mesh axis, e.g. ``(S(0), B)`` on a
``data x model`` mesh.
"""
from dataclasses import dataclass
from typing import Tuple

from .errors import SBPError


@dataclass(frozen=True)
class Split:
    axis: int

    def __repr__(self):
        return f"S({self.axis})"


@dataclass(frozen=True)
class _Broadcast:
    def __repr__(self):
        return "B"


@dataclass(frozen=True)
class _PartialSum:
    def __repr__(self):
        return "P"


broadcast = _Broadcast()
partial_sum = _PartialSum()
B, P = broadcast, partial_sum


def split(axis):
    if not isinstance(axis, int) or isinstance(axis, bool):
        raise SBPError(f"flow.sbp.split(axis): expected an int tensor axis, received {axis!r}")
    return Split(axis)


S = split


def is_sbp(value):
    return isinstance(value, (Split, _Broadcast, _PartialSum))


def format_nd(nd_sbp):
    return "(" + ", ".join(map(repr, nd_sbp)) + ")"


@dataclass(frozen=True)
class Signature:
    """Input SBPs -> output SBPs for one mesh axis, e.g. ``S(0) x B -> S(0)``.

    ``collectives`` names what the op's kernel itself communicates over the axis when it runs with this
    signature, each moving a tensor the size of its first output: the vocabulary-parallel cross-entropy
    (``B x S(-1) -> B``) reduces a max and two sums over the split classes, ``("all-reduce", "all-reduce",
    "all-reduce")``.  The planner charges and reports them like Boxing.  ``temporary_bytes``: a tensor the kernel
    builds whole for this signature only (the vocabulary-parallel lookup's one-hot ids), charged per device as
    bytes of Boxing are, so the signature wins only where it saves more than it writes.
    """
    inputs: Tuple
    outputs: Tuple
    collectives: Tuple = ()
    temporary_bytes: float = 0.0

    def __repr__(self):
        inner = f" ({', '.join(self.collectives)} inside)" if self.collectives else ""
        return " x ".join(map(repr, self.inputs)) + " -> " + ", ".join(map(repr, self.outputs)) + inner
