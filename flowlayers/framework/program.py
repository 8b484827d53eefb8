"""Building a Program (``contract.Program``): what a backend compiles, checked once as it is made.

A graph from placeholders to outputs, a phase, and optionally a loss to minimise with an optimizer; the nodes it
needs in order, each ``flow.recompute`` segment gathered, the variables it reads, the state a training step assigns
and the optimizer's slots.  Output modes (``numpy``, ``list``, ``sum``) are described on ``contract.Program``.
"""
from ..contract import Program
from ..errors import GraphError
from .graph import recompute_units, topo_sort

MODES = ("numpy", "list", "sum")


def build(inputs, outputs, output_modes, phase="predict", loss=None, optimizer=None, jit_compile=False, name="step",
          gradients=(), micro_batches=1, trained=None):
    """The Program computing ``outputs`` from ``inputs`` (placeholder Blobs), each returned as its mode says;
    ``gradients``: Blobs whose gradient of the mean loss the step also returns (``flow.watch_diff``); ``trained``:
    the variables the optimizer updates (default: every trainable variable the nodes read)."""
    if gradients and loss is None:
        raise GraphError(f"{name!r}: gradients of Blobs expected in a step with a loss, received none")
    roots = list(outputs) + ([loss] if loss is not None else [])
    nodes = topo_sort(roots + list(inputs))     # an input no output reads is still fed
    for node in nodes:
        if node.op.kind == "placeholder" and not any(node is x.node for x in inputs):
            raise GraphError(f"placeholder {node.name!r} is needed by the outputs but is not an input of "
                             f"{name!r}; pass it in inputs=[...]")
    variables = _unique(n.variable for n in nodes if n.op.kind == "variable")
    updates = [(var, node.outputs[i]) for node in nodes if phase == "train" for i, var in node.updates.items()
               if node.attrs.get("training") in (None, True)]
    if micro_batches > 1 and updates:
        var, blob = updates[0]
        who = f"layer {blob.node.layer.name!r}" if blob.node.layer is not None else f"op {blob.node.name!r}"
        raise GraphError(f"{name!r}: micro_batches={micro_batches} expected a model without state updated by each "
                         f"batch, received {who}, which updates {var.path!r} (BatchNormalization's moving "
                         f"statistics); train it with micro_batches=1, or use LayerNormalization")
    if micro_batches > 1 and any(m != "sum" for m in output_modes):
        raise GraphError(f"{name!r}: micro_batches={micro_batches} expected outputs summed over the batch (mode "
                         f"'sum'), received modes {list(output_modes)}")
    chosen = trained is not None
    if chosen:
        trained = list(trained)
        absent = [v.path for v in trained if not any(v is w for w in variables)]
        if absent:
            raise GraphError(f"{name!r}: expected to train variables the loss reads, received {absent}, which it "
                             f"does not read")
    else:
        trained = [v for v in variables if v.trainable] if loss is not None else []
    slots = {v.path: tuple(optimizer.slots(v)) for v in trained} if optimizer is not None else {}
    state = tuple(optimizer.state_variables().values()) if optimizer is not None and trained else ()
    return Program(tuple(inputs), tuple(outputs), tuple(output_modes), phase, loss, optimizer, jit_compile, name,
                   tuple(gradients), micro_batches, tuple(nodes),
                   tuple(recompute_units(nodes)) if phase == "train" else tuple(nodes), tuple(variables),
                   tuple(updates), slots, state, tuple(trained) if chosen and loss is not None else None)


def _unique(items):
    seen, out = set(), []
    for x in items:
        if id(x) not in seen:
            seen.add(id(x))
            out.append(x)
    return out
