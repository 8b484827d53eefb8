"""Where a test's model runs, set in one call: the view, device count, mesh, layout rules and seed, with automatic
names forgotten where asked so that every run names its layers (and so its variables) alike."""
import math

import flowlayers as flow


def use(view, devices=None, mesh=None, rules=None, seed=None, fresh=False):
    """Run what is built next in ``view`` on ``devices`` devices (default: the mesh's size, else one), on ``mesh``
    (``{axis: size}``; None: the default mesh) with layout ``rules`` (None: none).  ``fresh``: forget automatic
    names and variables first (``flow.clear_session``); ``seed``: set the global seed (None: leave it)."""
    if fresh:
        flow.clear_session()
    flow.config.set_view(view)
    flow.config.gpu_device_num(devices or (math.prod(mesh.values()) if mesh else 1))
    flow.config.set_mesh(**(mesh or {}))
    flow.config.set_layout_rules(rules or {})
    if seed is not None:
        flow.config.set_seed(seed)


def consistent(devices, mesh=None, rules=None, seed=0):
    """The consistent view, from a fresh session, with seed 0 unless told otherwise."""
    use("consistent", devices, mesh, rules, seed=seed, fresh=True)


def shards(var):
    """The shapes of the blocks of ``var`` its engine holds, one per device, read back from the engine."""
    runtime, handle = var.location
    return runtime.shard_shapes(handle)


def devices_of(spec):
    """A ``flow.scope.placement`` device spec (``"0:0-1"``, ``["0:0", "0:2"]``) -> the device ids, sorted."""
    specs = spec if isinstance(spec, list) else [spec]
    out = set()
    for s in specs:
        first_id, _, last_id = s.split(":")[1].partition("-")
        out.update(range(int(first_id), int(last_id or first_id) + 1))
    return tuple(sorted(out))
