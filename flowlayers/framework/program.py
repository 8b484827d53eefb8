"""Program: what a backend compiles.  A graph from placeholders to outputs, a phase, and
optionally a loss to minimise with an optimizer.

Output modes say how a value comes back to the host:

- ``numpy``: the logical value (mirrored view: replicas' rows concatenated; a
  scalar is the mean of the replicas' scalars).
- ``list``: one array per device (mirrored view).
- ``sum``: the sum of all elements over the whole logical batch (exact in every
  view; used for losses and metrics).
"""
from dataclasses import dataclass, field
from typing import List, Optional

from ..errors import GraphError
from .blob import Blob
from .graph import recompute_units, topo_sort
from .variable import Variable

MODES = ("numpy", "list", "sum")


@dataclass
class Program:
    inputs: List[Blob]
    outputs: List[Blob]
    output_modes: List[str]
    phase: str = "predict"            # train | eval | predict: decides dropout and batch-norm behaviour
    loss: Optional[Blob] = None
    optimizer: object = None
    jit_compile: bool = False
    name: str = "step"
    gradients: list = field(default_factory=list)   # Blobs whose gradient of the mean loss the step also returns
                                                    # (after the outputs, as logical numpy arrays: flow.watch_diff)
    micro_batches: int = 1            # a training batch split into this many, gradients summed, one update
    nodes: list = field(init=False)
    variables: List[Variable] = field(init=False)
    updates: list = field(init=False)
    units: list = field(init=False)   # the nodes in order, each flow.recompute segment gathered in one list
                                      # (a training step runs it as one recomputed function); else the nodes

    def __post_init__(self):
        if self.gradients and self.loss is None:
            raise GraphError(f"{self.name!r}: gradients of Blobs expected in a step with a loss, received none")
        roots = list(self.outputs) + ([self.loss] if self.loss is not None else [])
        self.nodes = topo_sort(roots + list(self.inputs))     # an input no output reads is still fed
        for node in self.nodes:
            if node.op.kind == "placeholder" and not any(node is x.node for x in self.inputs):
                raise GraphError(f"placeholder {node.name!r} is needed by the outputs but is not an input of "
                                 f"{self.name!r}; pass it in inputs=[...]")
        self.units = recompute_units(self.nodes) if self.phase == "train" else list(self.nodes)
        self.variables = _unique(n.variable for n in self.nodes if n.op.kind == "variable")
        self.updates = [(var, node.outputs[i]) for node in self.nodes if self.phase == "train"
                        for i, var in node.updates.items()
                        if node.attrs.get("training") in (None, True)]
        if self.micro_batches > 1 and self.updates:
            var, blob = self.updates[0]
            who = f"layer {blob.node.layer.name!r}" if blob.node.layer is not None else f"op {blob.node.name!r}"
            raise GraphError(f"{self.name!r}: micro_batches={self.micro_batches} expected a model without state "
                             f"updated by each batch, received {who}, which updates {var.path!r} (BatchNormalization's "
                             f"moving statistics); train it with micro_batches=1, or use LayerNormalization")
        if self.micro_batches > 1 and any(m != "sum" for m in self.output_modes):
            raise GraphError(f"{self.name!r}: micro_batches={self.micro_batches} expected outputs summed over the "
                             f"batch (mode 'sum'), received modes {self.output_modes}")

    @property
    def results(self):
        """The Blobs a step hands on: outputs, loss, state updates and watched Blobs."""
        return list(self.outputs) + [b for b in [self.loss] if b is not None] + [b for _, b in self.updates] + \
            list(self.gradients)

    @property
    def trainable(self):
        return [v for v in self.variables if v.trainable] if self.loss is not None else []

    def slots(self):
        """The optimizer's slot variables, created once per variable and kept with the optimizer."""
        if self.optimizer is None:
            return {}
        return {v.path: self.optimizer.slots(v) for v in self.trainable}


def _unique(items):
    seen, out = set(), []
    for x in items:
        if id(x) not in seen:
            seen.add(id(x))
            out.append(x)
    return out
