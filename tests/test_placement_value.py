"""Settings are stored when given, checked against each other at once, and start nothing; what runs takes them
once as an immutable Placement, so a setting changed later cannot reach a compiled program half-way."""
import ast
import dataclasses
from pathlib import Path

import numpy as np
import pytest

import flowlayers as flow
from flowlayers import backend_common, config, contract, settings as settings_mod

REPO = Path(__file__).resolve().parents[1]


def settings():
    return (config.device_num(), settings_mod._state["mesh"], config.view(), config.layout_rules(), config.seed())


def test_a_mesh_that_does_not_fit_the_device_count_set_is_refused_and_changes_nothing():
    flow.config.gpu_device_num(2)
    before = settings()
    with pytest.raises(flow.ConfigError) as e:
        flow.config.set_mesh(data=2, model=2)
    for words in ("set_mesh(data=2, model=2)", "device count 2 already set", "received a mesh of 4"):
        assert words in str(e.value), str(e.value)
    assert settings() == before
    flow.config.set_mesh(data=1, model=2)            # one that fits is taken
    assert config.mesh_shape() == {"data": 1, "model": 2}


def test_a_mesh_alone_sets_the_device_count():
    settings_mod.set_device_num(None)               # a fresh process: no count given yet
    try:
        flow.config.set_mesh(data=2, model=2)
        assert config.device_num() == 4
        assert config.placement().mesh == (("data", 2), ("model", 2))
    finally:
        flow.config.set_mesh()
        flow.config.gpu_device_num(1)


def test_placement_is_one_immutable_value_of_the_settings_in_force():
    flow.config.set_view("consistent")
    flow.config.gpu_device_num(4)
    flow.config.set_mesh(data=2, model=2)
    flow.config.set_layout_rules({"dense/kernel": (None, "model")})
    flow.config.set_seed(7)
    p = flow.config.placement()
    assert (p.view, p.device_num, p.mesh, p.layout_rules, p.seed, p.backend) == \
        ("consistent", 4, (("data", 2), ("model", 2)), (("dense/kernel", (None, "model")),), 7, config.backend_name())
    with pytest.raises(dataclasses.FrozenInstanceError):
        p.seed = 1
    flow.config.set_seed(8)
    assert p.seed == 7 and flow.config.placement() != p
    assert flow.config.placement("mirrored").axes == [("replica", 4)]


def test_a_seed_set_after_compiling_reaches_the_next_step():
    """The seed is taken with the placement at each fit: dropout draws with the seed in force (it was captured
    once at compile before), and the weights drawn at the first step are not drawn again."""
    def masks(seed):
        flow.config.set_seed(seed)
        return model.predict(x, batch_size=8, verbose=0)

    flow.config.set_view("mirrored")
    flow.config.gpu_device_num(1)
    x = np.ones((8, 16), np.float32)
    inputs = flow.Input((16,))
    model = flow.Model(inputs, flow.layers.Dropout(0.5)(inputs, training=True))
    first, again, other = masks(1), masks(1), masks(2)
    np.testing.assert_array_equal(first, again)
    assert (first != other).any()


def test_no_backend_module_reads_the_config_or_front_end_private_state():
    """Data flows down: a backend works from what it is handed (Placement values, VariableSpecs, plans, handles)."""
    offenders = []
    for path in sorted((REPO / "backends").rglob("*.py")):
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("flowlayers"):
                names = [a.name for a in node.names]
                if node.module in ("flowlayers", "flowlayers.config") and ("config" in names or
                                                                          node.module.endswith("config")):
                    offenders.append(f"{path.name}:{node.lineno} imports flowlayers config")
                if node.module not in ("flowlayers", "flowlayers.errors", "flowlayers.sbp", "flowlayers.contract",
                                       "flowlayers.backend_common"):
                    offenders.append(f"{path.name}:{node.lineno} imports the front end's {node.module}")
            if isinstance(node, ast.Attribute) and node.attr in ("_home", "_state", "_live_handle", "_runtime"):
                offenders.append(f"{path.name}:{node.lineno} reads .{node.attr}")
    assert not offenders, offenders


def test_the_backend_under_test_satisfies_the_contract():
    backend = flow.engine.backend()
    assert isinstance(backend, contract.Backend)
    assert backend_common.check_backend(backend) == []
    assert backend_common.check_backend(object(), {})[:1] == ["Backend.name"]
    assert "kernel 'matmul'" in backend_common.check_backend(backend, {})
    flow.config.set_view("consistent")
    flow.config.gpu_device_num(2)
    x = flow.Input((4,))
    model = flow.Model(x, flow.layers.Dense(3)(x))
    compiled = model.trainer.step("predict")
    assert isinstance(compiled.runtime, contract.Runtime) and isinstance(compiled.executable, contract.Executable)


def test_blob_sbp_is_read_from_the_plan_of_the_placement_in_force():
    from flowlayers.sbp import Split, broadcast

    flow.config.set_view("mirrored")
    flow.config.gpu_device_num(2)
    x = flow.Input((8,), batch_size=4)
    hidden = flow.layers.Dense(6, name="hidden")(x)
    model = flow.Model(x, flow.layers.Dense(2, name="out")(hidden))
    assert hidden.sbp is None                                    # the mirrored view has no SBP
    flow.config.set_view("consistent")
    assert hidden.sbp == (Split(0),)                             # built mirrored, planned consistent
    flow.config.set_mesh(data=1, model=2)
    flow.config.set_layout_rules({"hidden/kernel": (None, "model")})
    assert hidden.sbp == (Split(0), Split(1))                    # batch over "data", columns over "model"
    model.compile("sgd", "mse")
    compiled = model.trainer.step("train")
    assert all(b.sbp == compiled.plan(None).sbp[b] for n in compiled.program.nodes for b in n.outputs)
    flow.config.set_layout_rules({})
    assert hidden.sbp == (Split(0), broadcast)
