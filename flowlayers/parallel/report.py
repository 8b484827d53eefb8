"""``model.parallel_plan()``: what runs where — per variable its layout and the shard each device
really holds (read back from the engine), and every Boxing with its bytes per step.

    plan = model.parallel_plan()
    plan.variables["dense/kernel"].shard_shape      # (784, 64) on a model=2 mesh
    plan.bytes_per_device, plan.comm_bytes_per_step
    print(plan)                                      # a table
"""
import math
from dataclasses import dataclass
from typing import Tuple

from ..errors import describe_shape
from ..sbp import Split, broadcast, format_nd
from . import plan as planner


@dataclass(frozen=True)
class VariablePlacement:
    logical_shape: Tuple
    sbp: Tuple
    shard_shape: Tuple          # what one device holds (the largest shard, if they differ)
    shard_shapes: Tuple         # one per device, as the engine reports them
    bytes_per_device: int       # bytes of the largest shard
    itemsize: int
    devices: Tuple = ()         # indices of the devices holding it, as the engine reports them

    @property
    def logical_bytes(self):
        return math.prod(self.logical_shape) * self.itemsize


class ParallelPlan:
    def __init__(self, view, axes, batch, variables, boxing):
        self.view, self.axes, self.batch = view, list(axes), batch
        self.variables, self.boxing = variables, boxing

    @property
    def bytes_per_device(self):
        """Bytes of variables and optimizer state the fullest device holds."""
        held = {}
        for v in self.variables.values():
            for d in v.devices:
                held[d] = held.get(d, 0) + v.bytes_per_device
        return max(held.values(), default=0)

    @property
    def logical_bytes(self):
        return sum(v.logical_bytes for v in self.variables.values())

    @property
    def comm_bytes_per_step(self):
        return sum(b.bytes_per_step for b in self.boxing)

    def __str__(self):
        mesh = ", ".join(f"{a}={n}" for a, n in self.axes)
        every = math.prod(n for _, n in self.axes)
        rows = [("Variable", "Logical shape", "SBP", "Shard shape", "Bytes/device", "Devices")]
        rows += [(path, describe_shape(v.logical_shape), format_nd(v.sbp), describe_shape(v.shard_shape),
                  f"{v.bytes_per_device:,}", "all" if len(v.devices) == every else ",".join(f"0:{d}" for d in
                                                                                          v.devices))
                 for path, v in self.variables.items()]
        out = [f"Parallel plan ({self.view} view, mesh {mesh}, batch {self.batch})", *_table(rows)]
        out.append(f"Held per device: {self.bytes_per_device:,} bytes of {self.logical_bytes:,} logical "
                   f"({self.bytes_per_device / max(self.logical_bytes, 1):.1%})")
        rows = [("Producer -> consumer", "From", "To", "Collective", "Bytes/step", "Phase")]
        rows += [(f"{b.producer} -> {b.consumer}", format_nd(b.src), format_nd(b.dst),
                  ", ".join(f"{k} over {a}" for a, k in b.collectives), f"{b.bytes_per_step:,.0f}", b.phase)
                 for b in self.boxing]
        out += [""] + (_table(rows) if self.boxing else ["No Boxing: every op runs on the layouts it is given."])
        out.append(f"Communication per step: {self.comm_bytes_per_step:,.0f} bytes per device")
        return "\n".join(out)

    def __repr__(self):
        return (f"<ParallelPlan {self.view} mesh={dict(self.axes)} variables={len(self.variables)} "
                f"boxing={len(self.boxing)} bytes_per_device={self.bytes_per_device:,}>")


def _table(rows):
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    line = lambda r: "  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip()  # noqa: E731
    return [line(rows[0]), "-" * len(line(rows[0]))] + [line(r) for r in rows[1:]]


def _mirrored_source(node, axes, batch=None):
    """Mirrored view: every replica holds whole variables; the batch is split over the replicas."""
    if node.op.kind == "variable":
        return (broadcast,)
    return (Split(0),) if node.outputs[0].shape else (broadcast,)


def build(program, runtime, batch):
    """The ParallelPlan of ``program`` in ``runtime``; variables (and optimizer slots) are materialised there."""
    consistent, axes = runtime.view == "consistent", runtime.axes
    p = planner.plan(program.nodes, axes, batch, program.loss, program.trainable,
                     source_sbp=planner.source_sbp if consistent else _mirrored_source,
                     supports=getattr(runtime, "supports", None))
    variables = list(program.variables) + [s for slots in program.slots().values() for s in slots]
    placements = {}
    for var in variables:
        shards = tuple(tuple(s) for s in runtime.shard_shapes(var._live_handle(runtime)))
        itemsize = var.dtype.numpy.itemsize
        largest = max(shards, key=math.prod)
        nd = var.nd_sbp(dict(axes)) if consistent else (broadcast,)
        placements[var.path] = VariablePlacement(var.shape, nd, largest, shards, math.prod(largest) * itemsize,
                                                 itemsize, tuple(runtime.holders(var._live_handle(runtime))))
    return ParallelPlan(runtime.view, axes, batch, placements, p.boxing)
