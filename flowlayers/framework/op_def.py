"""An op's contract, declared once as data: shape and dtype inference, and its SBP signatures.

The front end only ever builds graphs of these ops; a backend lowers each op
by its ``name``.  Signatures describe one mesh axis; the planner combines
them per axis for N-D meshes (as PyTorch DTensor expands 1-D rules).
"""
from dataclasses import dataclass, field
from typing import Callable, Tuple

from ..errors import GraphError
from ..sbp import Signature  # noqa: F401  (an op's signatures are SBP data: defined with them)


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
