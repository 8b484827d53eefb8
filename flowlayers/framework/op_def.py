"""An op's contract, declared once as data: shape and dtype inference, and its SBP signatures.

The front end only ever builds graphs of these ops; a backend lowers each op
by its ``name``.  Signatures describe one mesh axis; the planner combines
them per axis for N-D meshes (as PyTorch DTensor expands 1-D rules).
"""
from dataclasses import dataclass, field
from typing import Callable, Tuple


@dataclass(frozen=True)
class Signature:
    """Input SBPs -> output SBPs for one mesh axis, e.g. ``S(0) x B -> S(0)``."""
    inputs: Tuple
    outputs: Tuple

    def __repr__(self):
        return " x ".join(map(repr, self.inputs)) + " -> " + ", ".join(map(repr, self.outputs))


@dataclass(frozen=True)
class OpDef:
    """``infer(inputs, attrs) -> [(shape, dtype), ...]``; ``signatures(inputs, attrs) -> [Signature]``.

    ``inputs`` are Blobs (read ``.shape`` and ``.dtype`` only).  ``infer``
    raises a ShapeError/DTypeError whose message names what was received;
    the graph builder prefixes it with the layer or op name.
    """
    name: str
    infer: Callable
    signatures: Callable
    stateful: bool = False          # needs the step's phase/seed (dropout, batch_norm)
    doc: str = field(default="", compare=False)
