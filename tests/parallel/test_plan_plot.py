"""``plan.plot(to_file)``: the picture of a parallel plan (the mesh, and each variable cut into the blocks the
devices hold) is a PNG file with one panel per variable; without matplotlib, a named error."""
import importlib.util
import struct
import sys

import pytest

import flowlayers as flow
from places import use

HAS_MATPLOTLIB = importlib.util.find_spec("matplotlib") is not None
RULES = {r"^hidden/kernel$": (None, "model"), r"^hidden/bias$": ("model",), r"^out/kernel$": ("model", None)}


def _plan():
    """A 2 x 2 data x model mesh, Megatron's MLP: 4 weights and their 4 momentum slots."""
    use("consistent", 4, {"data": 2, "model": 2}, RULES, fresh=True)
    x = flow.Input((6,))
    h = flow.layers.Dense(8, activation="relu", name="hidden")(x)
    model = flow.Model(x, flow.layers.Dense(3, name="out")(h))
    model.compile(optimizer=flow.optimizers.SGD(0.1, momentum=0.9), loss="mse")
    return model, model.parallel_plan(batch_size=8)


def _png_size(path):
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and data[12:16] == b"IHDR"
    return struct.unpack(">II", data[16:24])


@pytest.mark.skipif(not HAS_MATPLOTLIB, reason="matplotlib is not installed (the named error is tested below)")
def test_plan_of_a_2x2_mesh_plotted_to_png(tmp_path):
    model, plan = _plan()
    assert plan.variables["hidden/kernel"].shard_shape == (6, 4)
    every = tmp_path / "sub" / "plan.png"
    assert plan.plot(every) == every
    # the mesh and 8 variables (weights and momentum slots): 3 rows of 3 panels, 3.4 x 2.9 inches each at dpi 100
    assert _png_size(every) == (1020, 870)
    weights = tmp_path / "weights.png"
    plan.plot(weights, variables=[w.path for w in model.weights], dpi=50)
    assert _png_size(weights) == (510, 290)                        # the mesh and 4 weights: 2 rows, at dpi 50
    with pytest.raises(flow.ConfigError, match=r"\['hidden/kernal'\] are not in the plan"):
        plan.plot(tmp_path / "x.png", variables=["hidden/kernal"])


def test_plan_plot_without_matplotlib_is_a_named_error(tmp_path, monkeypatch):
    _, plan = _plan()
    for name in ("matplotlib", "matplotlib.figure", "matplotlib.patches"):
        monkeypatch.setitem(sys.modules, name, None)          # import of it now raises ImportError
    with pytest.raises(flow.ConfigError, match=r"ParallelPlan.plot: expected matplotlib.*pip install matplotlib"):
        plan.plot(tmp_path / "plan.png")
    assert not (tmp_path / "plan.png").exists()
    assert "hidden/kernel" in str(plan)                        # the plan stays usable
