"""``model.summary()``: layers, output shapes, SBP, parameter counts in total and per device."""
import math

from .. import config, engine
from ..errors import describe_shape
from ..parallel import plan as planner
from ..sbp import format_nd


def _per_device(var, mesh):
    """Elements of ``var`` one device holds under its layout in the consistent view."""
    if mesh is None:
        return math.prod(var.shape)
    spec = var.mesh_spec(mesh)
    n = math.prod(var.shape)
    for axis in spec:
        if axis is not None:
            n //= mesh[axis]
    return n


def _planned_sbps(model, mesh):
    """Output SBPs as the planner lays out the training step (once compiled with a loss) or the predict step."""
    phase = "train" if model.loss is not None and model.optimizer is not None else "predict"
    program = next((e.program for key, e in model._programs.items() if key[0] == phase), None)
    program = program or model._program("predict")
    supports = getattr(engine.runtime(), "supports", None)    # what the backend can realise
    return planner.plan(program.nodes, list(mesh.items()), None, program.loss, program.trainable,
                        supports=supports).sbp


def summary(model):
    mesh = config.mesh_shape() if config.view() == "consistent" else None
    sbps = _planned_sbps(model, mesh) if mesh else {}
    rows = [("Layer (type)", "Output shape", "SBP" if mesh else "", "Param #", "Per device")]
    for layer in model.layers:
        out = layer.outputs[0] if hasattr(layer, "outputs") else layer.output     # a nested model: its first
        shape = describe_shape(out.shape) if out is not None else "?"
        sbp = format_nd(sbps[out]) if out in sbps else ""
        params = sum(math.prod(w.shape) for w in layer.weights)
        per_dev = sum(_per_device(w, mesh) for w in layer.weights)
        rows.append((f"{layer.name} ({type(layer).__name__})", shape, sbp, f"{params:,}", f"{per_dev:,}"))
    widths = [max(len(r[i]) for r in rows) for i in range(5)]
    line = lambda r: "  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip()  # noqa: E731
    total = sum(math.prod(w.shape) for w in model.weights)
    trainable = sum(math.prod(w.shape) for w in model.trainable_weights)
    per_device = sum(_per_device(w, mesh) for w in model.weights)
    view = f"consistent view, mesh {mesh}" if mesh else f"{config.view()} view, {config.device_num()} device(s)"
    out = [f'Model: "{model.name}" ({view})', "=" * len(line(rows[0])), line(rows[0]), "-" * len(line(rows[0]))]
    out += [line(r) for r in rows[1:]]
    out += ["=" * len(line(rows[0])), f"Total params: {total:,}", f"Trainable params: {trainable:,}",
            f"Non-trainable params: {total - trainable:,}", f"Params held per device: {per_device:,}"]
    return "\n".join(out)
