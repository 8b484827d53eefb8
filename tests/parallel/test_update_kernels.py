"""The step as the engine gets it: lean, and computing what the written-out rules compute.

- Optimizer rules run as TF's kernels for whole rules (``TFMath.apply_sgd`` / ``apply_adam``): one op per
  variable instead of five to fifteen.  In every view each rule trains to the weights it reaches when the
  namespace offers no kernel, and the update step holds one kernel per variable.
- The consistent view pins only the layouts DTensor would not keep by itself: a data-parallel MLP's gradient
  step holds a handful of Relayouts, not one (and one RelayoutLike) per op, and still trains to one device's
  weights.
"""
import collections

import numpy as np
import pytest

import flowlayers as flow
from places import use

pytest.importorskip("tensorflow")     # the import below needs it: without it the file is skipped
from flowlayers_tensorflow.executable import TFMath  # noqa: E402

pytestmark = pytest.mark.tensorflow_backend

BATCH, STEPS = 16, 4
PLACES = [("mirrored", 1), ("mirrored", 2), ("consistent", 2)]
RULES = {
    "sgd": (lambda: flow.optimizers.SGD(0.1), "ResourceApplyGradientDescent"),
    "momentum": (lambda: flow.optimizers.SGD(0.1, momentum=0.9), "ResourceApplyKerasMomentum"),
    "nesterov": (lambda: flow.optimizers.SGD(0.1, momentum=0.9, nesterov=True), "ResourceApplyKerasMomentum"),
    "adam": (lambda: flow.optimizers.Adam(0.01), "ResourceApplyAdam"),
    "adamw": (lambda: flow.optimizers.AdamW(0.01, weight_decay=0.1), "ResourceApplyAdam"),
}


def train(view, n, optimizer, layers=3):
    use(view, n, fresh=True)
    rng = np.random.default_rng(0)
    x = rng.standard_normal((BATCH * STEPS, 8)).astype(np.float32)
    y = rng.integers(0, 4, BATCH * STEPS).astype(np.int32)
    flow.config.set_seed(1)
    inp = h = flow.Input((8,))
    for i in range(layers):
        h = flow.layers.Dense(16, activation="relu", name=f"fc{i}")(h)
    model = flow.Model(inp, flow.layers.Dense(4, name="out")(h))
    model.compile(optimizer=optimizer, loss=flow.losses.SparseCategoricalCrossentropy(from_logits=True))
    model.fit(x, y, batch_size=BATCH, epochs=1, verbose=0, shuffle=False)
    return model


def traced_ops(model, which):
    """Op types of the traced update ("apply") or gradient ("forward") step of ``model``'s train executable."""
    exe = model.trainer.step("train").executable
    if which == "apply":                            # one device's update, traced once for all (N > 1 devices)
        fns = [exe._apply_fn]
    else:                                           # consistent view: the DTensor gradient step
        fns = [exe._fns[(BATCH,)][1] if hasattr(exe, "_fns") else exe._local_fn]
    return collections.Counter(op.type for fn in fns for c in fn._list_all_concrete_functions()
                               for op in c.graph.get_operations())


@pytest.mark.parametrize("place", PLACES, ids=[f"{v}{n}" for v, n in PLACES])
@pytest.mark.parametrize("rule", sorted(RULES))
def test_rule_kernels_compute_the_written_out_rule(rule, place, monkeypatch):
    make, kernel = RULES[rule]
    fused = train(*place, make())
    if place[1] > 1:
        ops = traced_ops(fused, "apply")
        assert ops[kernel] == len(fused.trainable_weights), ops
        assert ops["Pow"] <= 2 and not ops["Sqrt"], ops        # the rule is not written out beside its kernel
        assert not ops["Mul"] or rule == "adamw", ops          # (AdamW's decay is, before the kernel)
    fused_weights = fused.get_weights()
    monkeypatch.setattr(TFMath, "whole_rules", frozenset())
    written = train(*place, make())
    if place[1] > 1:
        assert not traced_ops(written, "apply")[kernel]
    for a, b in zip(fused_weights, written.get_weights()):     # the same up to rounding (Adam: ~2.5e-7)
        np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-6)


def test_data_parallel_step_pins_only_what_dtensor_would_not_keep():
    deep = 12
    model = train("consistent", 2, flow.optimizers.SGD(0.1, momentum=0.9), layers=deep)
    ops = traced_ops(model, "forward")
    assert ops["MatMul"] >= 3 * deep                       # forward and both gradients of each layer
    assert ops["Relayout"] + ops["RelayoutLike"] <= 8, ops  # was 3 + 3 per layer
    assert not model.trainer.step("train").executable._relayouts[(BATCH,)]   # gradients arrive laid out as their variables
    one = train("mirrored", 1, flow.optimizers.SGD(0.1, momentum=0.9), layers=deep)
    for a, b in zip(model.get_weights(), one.get_weights()):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)


MESHES = {                  # mesh, layout rules, what the gradient step hands over in another layout than its variable
    "data4": ({"data": 4}, {}, []),
    "model4": ({"model": 4}, {r"^fc1/kernel$": (None, "model"), r"^fc1/bias$": ("model",),
                              r"^fc2/kernel$": ("model", None)},
               ["bn/gamma", "bn/beta", "bn/moving_mean", "bn/moving_variance"]),
    "data2model2": ({"data": 2, "model": 2}, {r"^fc1/kernel$": ("model", None), r"^out/kernel$": (None, "model"),
                                              r"^bn/gamma$": ("model",), r"^bn/moving_mean$": ("model",)},
                    ["fc1/bias", "bn/beta", "bn/moving_variance"]),
}


def fit_batch_norm(view, n, optimizer, mesh=None, rules=None):
    use(view, n, mesh, rules, seed=1, fresh=True)
    x = flow.Input((8,))
    h = flow.layers.BatchNormalization(name="bn")(flow.layers.Dense(16, activation="relu", name="fc1")(x))
    h = flow.layers.Dense(16, activation="relu", name="fc2")(h)
    model = flow.Model(x, flow.layers.Dense(4, name="out")(h))
    model.compile(optimizer=optimizer, loss=flow.losses.SparseCategoricalCrossentropy(from_logits=True))
    rng = np.random.default_rng(0)
    model.fit(rng.standard_normal((64, 8)).astype(np.float32), rng.integers(0, 4, 64), batch_size=BATCH, epochs=2,
              verbose=0, shuffle=False)
    return model


@pytest.mark.parametrize("mesh", sorted(MESHES))
@pytest.mark.parametrize("optimizer", ["momentum", "adam"])
def test_each_device_updates_the_blocks_it_holds_as_one_device_would(optimizer, mesh):
    """The consistent update runs TF's kernel for the rule on each device's block of each variable (split or
    replicated), outside DTensor; gradients and batch norm's statistics that DTensor hands over in another layout
    than their variable's are relaid out first.  Weights and moving statistics end where one device's do."""
    mesh, rules, moved = MESHES[mesh]
    model = fit_batch_norm("consistent", 4, RULES[optimizer][0](), mesh, rules)
    exe = model.trainer.step("train").executable
    assert traced_ops(model, "apply")[RULES[optimizer][1]] == len(model.trainable_weights) == 8
    relayout = exe._relayouts[(BATCH,)]
    assert sorted(exe._written[i].path for i in (relayout[0] if relayout else [])) == sorted(moved)
    weights = model.get_weights()
    assert len(weights) == 10                                 # with the moving mean and variance
    for a, b in zip(weights, fit_batch_norm("mirrored", 1, RULES[optimizer][0]()).get_weights()):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)
