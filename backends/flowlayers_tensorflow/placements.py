"""Which steps with placements (``flow.scope.placement`` on some of the devices) run as one DTensor step function.

The consistent view gives each placement a DTensor mesh of its devices.  A step whose tensors go only forward,
from all devices into placements and from one placement to another of the same size, runs as one step function
that moves tensors between meshes with ``copy_to_mesh``.  DTensor (TF 2.21) runs such a function as one function
per mesh, each waiting for the others' tensors; where the meshes feed each other in a cycle (all devices -> ``0:0``
-> all devices) the step never finishes (a loss on all devices after a layer on one device hangs), and moving
tensors between placements of different sizes hangs as well (on 4 devices: ``0:3`` -> ``0:0-1`` and ``0:0-1`` ->
``0:2`` hang; ``0:0-1`` -> ``0:2-3``, ``0:2-3`` -> ``0:0-1`` and any two single devices run).
``bench/probe_dtensor_placements.py`` reproduces both.  Such steps run stage by stage instead (``staged.py``), the
copies between meshes made outside the step functions.  The mirrored view keeps a whole replica on every device
and has no placements.
"""
from flowlayers.errors import ConfigError


def _where(placement):
    return "all devices" if placement is None else "devices " + ",".join(f"0:{d}" for d in placement)


def hangs(program):
    """Why ``program`` would hang as one DTensor step function (its data flowing back to all devices, around a
    cycle of placements, or between placements of different sizes), or None where it runs as one."""
    follows = {}                    # placement -> placements its tensors go to
    sizes = {}
    for node in program.nodes:
        if node.placement is not None:
            sizes.setdefault(len(node.placement), node)
    if len(sizes) > 1:
        a, b, *_ = sizes.values()
        return (f"op {a.name!r} on {_where(a.placement)} and op {b.name!r} on {_where(b.placement)}: placements of "
                f"different sizes")
    for node in program.nodes:
        for x in node.inputs:
            src, dst = x.node.placement, node.placement
            if src == dst:
                continue
            if dst is None:
                return f"op {node.name!r} on all devices reads {x.name!r} made on {_where(src)}"
            follows.setdefault(src, set()).add(dst)
    for start in follows:
        stack, seen = [(start, [start])], set()
        while stack:
            at, path = stack.pop()
            for nxt in follows.get(at, ()):
                if nxt == start and start is not None:
                    return f"tensors go around {' -> '.join(_where(p) for p in path + [start])}"
                if nxt not in seen:
                    seen.add(nxt)
                    stack.append((nxt, path + [nxt]))
    return None


def check_mirrored(program):
    """The mirrored view has no placements on some devices: a node built under one is refused by name."""
    placed = next((n for n in program.nodes if n.placement is not None), None)
    if placed is not None:
        what = f"variable {placed.name!r}" if placed.op.kind == "variable" else f"op {placed.name!r}"
        raise ConfigError(f"{what} of {program.name!r} was built under flow.scope.placement on "
                          f"{_where(placed.placement)}: expected the consistent view, which places it there; the "
                          f"mirrored view keeps a whole replica of the model on every device, so build the model "
                          f"again without the placement, or use the consistent view")
