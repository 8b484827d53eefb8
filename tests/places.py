"""Where a test's model runs, set in one call: the view, device count, mesh, layout rules and seed, with automatic
names forgotten so that every run names its layers (and so its variables) alike."""
import flowlayers as flow


def consistent(devices, mesh=None, rules=None, seed=0):
    flow.config.set_view("consistent")
    flow.config.gpu_device_num(devices)
    flow.config.set_mesh(**(mesh or {}))
    flow.config.set_layout_rules(rules or {})
    flow.clear_session()
    flow.config.set_seed(seed)


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
