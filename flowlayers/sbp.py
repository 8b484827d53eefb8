"""SBP values: how one logical tensor lies over one mesh axis.

They are tiny frozen values that print as OneFlow writes them::

    >>> split(0), broadcast, partial_sum
    (S(0), B, P)

An nd-SBP is a tuple with one value per mesh axis, e.g. ``(S(0), B)`` on a
``data x model`` mesh.
"""
from dataclasses import dataclass

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
