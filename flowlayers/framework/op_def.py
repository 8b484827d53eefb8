"""An op's contract, declared once as data: shape and dtype inference, and its SBP signatures.

The front end only ever builds graphs of these ops; a backend lowers each op
by its ``name``.  Signatures describe one mesh axis; the planner combines
them per axis for N-D meshes (as PyTorch DTensor expands 1-D rules).
"""
from dataclasses import dataclass, field
from typing import Callable, Tuple

from ..errors import GraphError


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


@dataclass(frozen=True)
class OpDef:
    """``infer(inputs, attrs) -> [(shape, dtype), ...]``; ``signatures(inputs, attrs) -> [Signature]``.

    ``inputs`` are Blobs (read ``.shape`` and ``.dtype`` only).  ``infer``
    raises a ShapeError/DTypeError whose message names what was received;
    the graph builder prefixes it with the layer or op name.

    ``kind``: what the op is to the planner and the engines, never told apart by name: ``"compute"`` (a kernel
    computes it), a source (``"placeholder"``: fed each step; ``"variable"``: read from the engine's state;
    ``"constant"``), or ``"constraint"`` (identity on values, pins an SBP: ``Blob.with_sbp``).
    """
    name: str
    infer: Callable
    signatures: Callable
    kind: str = "compute"
    doc: str = field(default="", compare=False)

    def __post_init__(self):
        if self.kind not in KINDS:
            raise GraphError(f"OpDef {self.name!r}: kind expected one of {KINDS}, received {self.kind!r}; leave it "
                             f"out for an op a kernel computes")

    @property
    def is_source(self):
        """Whether it takes no inputs and starts the graph: a placeholder, a variable or a constant."""
        return self.kind in ("placeholder", "variable", "constant")


KINDS = ("compute", "placeholder", "variable", "constant", "constraint")
