"""``model.parallel_plan()``: what runs where — per variable its layout and the shard each device
holds (read back from the engine where it is installed, else computed from the layout: the same numbers), and every
Boxing with its bytes per step.

    plan = model.parallel_plan()
    plan.variables["dense/kernel"].shard_shape      # (784, 64) on a model=2 mesh
    plan.bytes_per_device, plan.comm_bytes_per_step
    print(plan)                                      # a table
    plan.plot("plan.png")                            # a picture: the mesh, and who holds which block
    plan.compiled_program()                          # the program the engine compiled (jax: XLA's optimized HLO)
"""
import math
from dataclasses import dataclass
from typing import Tuple

import numpy as np

from ..errors import ConfigError, InputError, describe_shape
from ..sbp import Split, broadcast, format_nd
from . import plan_plot


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
    def __init__(self, view, axes, batch, variables, boxing, compiled=None):
        self.view, self.axes, self.batch = view, list(axes), batch
        self.variables, self.boxing = variables, boxing
        self._compiled = compiled

    def compiled_program(self):
        """The program the engine compiles for this plan's step (``batch`` rows), as the engine writes it: on the
        jax backend XLA's optimized HLO after partitioning, where the plan's Boxing are its collectives.  Compiled,
        not run.  A backend that cannot show it says so (``flow.ConfigError``)."""
        compiled = self._compiled
        if compiled is None:
            raise ConfigError("compiled_program(): this ParallelPlan was not made by parallel_plan(), so it names no "
                              "compiled step; expected model.parallel_plan() or a job function's")
        if not compiled.capabilities.shows_program:
            raise ConfigError(f"parallel_plan().compiled_program(): the {compiled.placement.backend!r} backend does "
                              f"not show the program its engine compiles; expected a backend whose steps have "
                              f"compiled_text (jax); see its own tools for dumping programs")
        feeds = [_zeros(x, self.batch, compiled.program.name) for x in compiled.program.inputs]
        feeds = [[f] * compiled.placement.device_num if x.node.attrs.get("kind") == "list" else f
                 for f, x in zip(feeds, compiled.program.inputs)]
        return compiled.compiled_text(feeds, compiled.program.optimizer)

    def plot(self, to_file, variables=None, dpi=100):
        """A picture of this plan in ``to_file`` (png, svg, pdf: by its extension): the device mesh, and for each
        of ``variables`` (paths; default every variable of the plan, optimizer slots included) its logical shape
        cut into the blocks the devices hold, coloured by device (grey: every device holds it).  Needs matplotlib
        (``flow.ConfigError`` without it).  Returns ``to_file``."""
        return plan_plot.plot(self, to_file, variables, dpi)

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


def _zeros(blob, batch, program):
    """A feed of zeros for input ``blob`` with ``batch`` rows (None: its own)."""
    shape = tuple(blob.shape)
    if shape and batch is not None:
        shape = (batch,) + shape[1:]
    if any(d is None for d in shape):
        raise InputError(f"parallel_plan().compiled_program(): input {blob.name!r} of {program!r} has shape "
                         f"{describe_shape(blob.shape)}; expected every dim known but the batch (given by "
                         f"parallel_plan(batch_size=...)) to compile a step for it")
    return np.zeros(shape, blob.dtype.numpy)


def build(compiled, batch, read_back=True):
    """The ParallelPlan of a Compiled program for ``batch`` fed rows: its plan, and per variable (and optimizer
    slot) the shards each device holds: read back from its engine (``read_back``), else computed from the
    variable's layout on the placement, without an engine."""
    placement = compiled.placement
    handles = compiled.handles() if read_back else None      # materialised in the runtime: the shards are read back
    placements = {}
    for var in compiled.variables:
        nd = var.layout(placement) if placement.consistent else (broadcast,)
        if read_back:
            shards = tuple(tuple(s) for s in compiled.runtime.shard_shapes(handles[var.path]))
            holders = tuple(compiled.runtime.holders(handles[var.path]))
        else:
            holders = tuple(var.placement) if var.placement is not None else tuple(range(placement.device_num))
            shards = (shard_shape(var.shape, nd, placement.axes if placement.consistent else [("replica", 1)]),) \
                * len(holders)
        itemsize = var.dtype.numpy.itemsize
        largest = max(shards, key=math.prod)
        placements[var.path] = VariablePlacement(var.shape, nd, largest, shards, math.prod(largest) * itemsize,
                                                 itemsize, holders)
    return ParallelPlan(placement.view, placement.axes, batch, placements, compiled.plan(batch).boxing, compiled)


def shard_shape(shape, nd_sbp, axes):
    """The block of a tensor of ``shape`` laid out as ``nd_sbp`` over mesh ``axes`` that one device holds (layouts
    split only dims that divide)."""
    block = list(shape)
    for sbp, (_, n) in zip(nd_sbp, axes):
        if isinstance(sbp, Split):
            block[sbp.axis] //= n
    return tuple(block)
