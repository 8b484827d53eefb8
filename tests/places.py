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


def runs_placements_on_some_devices():
    """Whether the backend in force runs steps with ``flow.scope.placement`` on some of the devices: tensorflow
    does (a DTensor mesh per placement, tensors copied between them); jax does not (a step is one XLA program over
    the whole mesh) and refuses such a step by name before it runs (``placement_refused``)."""
    return flow.config.backend_name() == "tensorflow"


def placement_refused(what, program, devices, view="consistent"):
    """``pytest.raises`` of the jax backend's refusal of a step built under a placement on some devices: it names
    the first variable or op built under one (``what``, e.g. ``"variable 'hidden/kernel'"``), the step
    (``program``), the placement's devices (``"0:0,0:1"``) and the view.  Skips the test on a backend whose words
    for it are not known here."""
    import re

    import pytest

    backend = flow.config.backend_name()
    if backend != "jax":
        pytest.skip(f"the {backend} backend's refusal of placements on some devices is not worded here")
    return pytest.raises(flow.ConfigError, match=re.escape(
        f"{what} of {program!r} was built under flow.scope.placement on devices {devices}: expected no placement "
        f"on some devices on the jax backend") + ".*" + re.escape(f"({view} view)"))


def refusal(what, program, devices, tensorflow_match):
    """The refusal a step with placements on some devices meets: on tensorflow (which runs placements) the
    ``ConfigError`` matching ``tensorflow_match``, elsewhere ``placement_refused``."""
    import pytest

    if runs_placements_on_some_devices():
        return pytest.raises(flow.ConfigError, match=tensorflow_match)
    return placement_refused(what, program, devices)


def devices_of(spec):
    """A ``flow.scope.placement`` device spec (``"0:0-1"``, ``["0:0", "0:2"]``) -> the device ids, sorted."""
    specs = spec if isinstance(spec, list) else [spec]
    out = set()
    for s in specs:
        first_id, _, last_id = s.split(":")[1].partition("-")
        out.update(range(int(first_id), int(last_id or first_id) + 1))
    return tuple(sorted(out))


def named(ids):
    """Device ids -> how messages name them: ``"0:0,0:1"``."""
    return ",".join(f"0:{d}" for d in ids)
