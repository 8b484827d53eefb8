"""Which placements (``flow.scope.placement`` on some of the devices) a step may use on this engine.

The consistent view gives each placement a DTensor mesh of its devices and moves tensors between meshes with
``copy_to_mesh`` inside the step.  DTensor (TF 2.21) runs such a step as one function per mesh, each waiting for
the others' tensors; where the meshes feed each other in a cycle (all devices -> ``0:0`` -> all devices) the step
never finishes (tried: a loss on all devices after a layer on one device hangs).  So a step's data may go from all
devices into placements and from one placement to another, but never back: refused before any step runs.  Steps
moving tensors between placements of different sizes hang as well (tried on 4 devices: ``0:3`` -> ``0:0-1`` and
``0:0-1`` -> ``0:2`` hang; ``0:0-1`` -> ``0:2-3``, ``0:2-3`` -> ``0:0-1`` and any two single devices run), so the
placements on some devices of one step have one size.  The mirrored view keeps a whole replica on every device
and has no placements.
"""
from flowlayers.errors import ConfigError


def _where(placement):
    return "all devices" if placement is None else "devices " + ",".join(f"0:{d}" for d in placement)


def check_consistent(program):
    """Refuse a step whose data would flow back to all devices, or around a cycle of placements."""
    follows = {}                    # placement -> placements its tensors go to
    sizes = {}
    for node in program.nodes:
        if node.placement is not None:
            sizes.setdefault(len(node.placement), node)
    if len(sizes) > 1:
        a, b, *_ = sizes.values()
        raise ConfigError(f"flow.scope.placement: {program.name!r} places op {a.name!r} on {_where(a.placement)} and "
                          f"op {b.name!r} on {_where(b.placement)}; expected placements on some devices of one size "
                          f"in a step (TF DTensor's steps hang moving tensors between meshes of different sizes)")
    for node in program.nodes:
        for x in node.inputs:
            src, dst = x.node.placement, node.placement
            if src == dst:
                continue
            if dst is None:
                raise ConfigError(f"op {node.name!r} runs on all devices but reads {x.name!r} made under "
                                  f"flow.scope.placement on {_where(src)}: expected the ops after a placement on "
                                  f"some devices (the loss too) inside a placement; TF DTensor's steps hang when "
                                  f"tensors go back from some devices to all of them, so put this op in a "
                                  f"flow.scope.placement as well")
            follows.setdefault(src, set()).add(dst)
    for start in follows:
        stack, seen = [(start, [start])], set()
        while stack:
            at, path = stack.pop()
            for nxt in follows.get(at, ()):
                if nxt == start and start is not None:
                    raise ConfigError(f"flow.scope.placement: tensors of {program.name!r} go around the placements "
                                      f"{' -> '.join(_where(p) for p in path + [start])}; expected each placement "
                                      f"to feed only later ones (TF DTensor's steps hang on such cycles)")
                if nxt not in seen:
                    seen.add(nxt)
                    stack.append((nxt, path + [nxt]))


def check_mirrored(program):
    """The mirrored view has no placements on some devices: a node built under one is refused by name."""
    placed = next((n for n in program.nodes if n.placement is not None), None)
    if placed is not None:
        what = f"variable {placed.name!r}" if placed.op.kind == "variable" else f"op {placed.name!r}"
        raise ConfigError(f"{what} of {program.name!r} was built under flow.scope.placement on "
                          f"{_where(placed.placement)}: expected the consistent view, which places it there; the "
                          f"mirrored view keeps a whole replica of the model on every device, so build the model "
                          f"again without the placement, or use the consistent view")
