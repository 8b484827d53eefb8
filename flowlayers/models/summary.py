"""``model.summary()``: layers, output shapes, SBP, parameter counts in total and per device."""
import math

from ..errors import describe_shape
from ..sbp import format_nd


def _per_device(var, mesh, rules):
    """Elements of ``var`` one device holds under its layout in the consistent view."""
    if mesh is None:
        return math.prod(var.shape)
    n = math.prod(var.shape)
    for axis in var.mesh_spec(mesh, rules):
        if axis is not None:
            n //= mesh[axis]
    return n


def summary(model, placement, compiled):
    """The table of ``model`` on ``placement``; output SBPs from ``compiled``'s plan (the step the engine runs,
    planned once and without an engine)."""
    mesh, rules = (dict(placement.mesh), placement.rules()) if placement.consistent else (None, {})
    sbps = compiled.plan(None).sbp if mesh else {}
    rows = [("Layer (type)", "Output shape", "SBP" if mesh else "", "Param #", "Per device")]
    for layer in model.layers:
        out = layer.outputs[0] if hasattr(layer, "outputs") else layer.output     # a nested model: its first
        shape = describe_shape(out.shape) if out is not None else "?"
        sbp = format_nd(sbps[out]) if out in sbps else ""
        params = sum(math.prod(w.shape) for w in layer.weights)
        per_dev = sum(_per_device(w, mesh, rules) for w in layer.weights)
        rows.append((f"{layer.name} ({type(layer).__name__})", shape, sbp, f"{params:,}", f"{per_dev:,}"))
    widths = [max(len(r[i]) for r in rows) for i in range(5)]
    line = lambda r: "  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip()  # noqa: E731
    total = sum(math.prod(w.shape) for w in model.weights)
    trainable = sum(math.prod(w.shape) for w in model.trainable_weights)
    per_device = sum(_per_device(w, mesh, rules) for w in model.weights)
    view = f"consistent view, mesh {mesh}" if mesh else f"{placement.view} view, {placement.device_num} device(s)"
    out = [f'Model: "{model.name}" ({view})', "=" * len(line(rows[0])), line(rows[0]), "-" * len(line(rows[0]))]
    out += [line(r) for r in rows[1:]]
    out += ["=" * len(line(rows[0])), f"Total params: {total:,}", f"Trainable params: {trainable:,}",
            f"Non-trainable params: {total - trainable:,}", f"Params held per device: {per_device:,}"]
    return "\n".join(out)
