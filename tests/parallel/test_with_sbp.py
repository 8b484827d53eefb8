"""Blob.with_sbp: a constraint on a hidden activation changes where the work runs, not the result.

- A constrained MLP trains to one device's weights on 2 devices and on a 2x2 ``data x model`` mesh.
- The TF backend realises the constraint: the traced gradient step relays the constrained Blob out to the
  constrained layout (a DTensor Relayout whose ``layout`` attribute is that layout), which the same model without
  the constraint does not hold.
- Mistakes are named (the Blob, what was expected, what was received, how to fix it) while the model is built,
  and the model built on after the mistake trains to exactly the weights of a run that never made it.
- One dim split over both axes of a 2x2 mesh, ``(S(0), S(0))``, is such a mistake where the backend gives each
  tensor dim one mesh axis (tensorflow: DTensor); where it declares ``splits_dim_over_several_axes`` (jax: a
  ``PartitionSpec`` entry may name several axes), the constrained model trains to one device's weights instead.
"""
import collections

import numpy as np
import pytest

import flowlayers as flow
from flowlayers.sbp import B, S
from places import use

STEPS, BATCH = 4, 16
MESHES = {"2": {"data": 2}, "2x2": {"data": 2, "model": 2}}


def data():
    rng = np.random.default_rng(3)
    return rng.normal(size=(STEPS * BATCH, 16)).astype(np.float32), rng.integers(0, 10, STEPS * BATCH)


def mlp(nd_sbp=None, hidden=32, mistake=None):
    """16 -> hidden (relu) -> 10; the hidden activation constrained to ``nd_sbp``; ``mistake`` is tried on it
    (and must raise) before the model is built on."""
    flow.clear_session()
    x = flow.Input((16,))
    h = flow.layers.Dense(hidden, activation="relu", name="hidden")(x)
    if mistake is not None:
        with pytest.raises(flow.SBPError) as error:
            h.with_sbp(*mistake)
        mlp.error = str(error.value)
    if nd_sbp is not None:
        h = h.with_sbp(*nd_sbp)
    mlp.hidden = h
    model = flow.Model(x, flow.layers.Dense(10, name="out")(h))
    model.compile(optimizer=flow.optimizers.Adam(0.01),
                  loss=flow.losses.SparseCategoricalCrossentropy(from_logits=True))
    return model


def splits_dim_over_several_axes():
    """The backend's declared capability (optional in the contract: absent is False)."""
    return flow.engine.capabilities().splits_dim_over_several_axes


def fit(model):
    model.fit(*data(), batch_size=BATCH, epochs=1, shuffle=False, verbose=0)
    return model.get_weights()


def relayouts(model):
    """(layout, input shape) of every DTensor Relayout in the traced gradient step of ``model``."""
    fn = model.trainer.step("train").executable._fns[(BATCH,)][1]
    return collections.Counter((op.get_attr("layout").decode(), tuple(op.inputs[0].shape))
                               for c in fn._list_all_concrete_functions() for op in c.graph.get_operations()
                               if op.type == "Relayout")


CONSTRAINTS = [("2", (S(1),)), ("2", (B,)), ("2x2", (S(1), S(0))), ("2x2", (B, S(1))), ("2x2", (S(0), B))]


@pytest.mark.parametrize("mesh_name,nd_sbp", CONSTRAINTS, ids=[f"{m}-{nd}" for m, nd in CONSTRAINTS])
def test_constrained_model_trains_to_one_device_weights(mesh_name, nd_sbp):
    use("mirrored", 1)
    reference = fit(mlp())
    use("consistent", mesh=MESHES[mesh_name])
    model = mlp(nd_sbp)
    weights = fit(model)
    for got, want in zip(weights, reference):
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("mesh_name,nd_sbp", [c for c in CONSTRAINTS if B not in c[1]],
                         ids=[f"{m}-{nd}" for m, nd in CONSTRAINTS if B not in nd])
@pytest.mark.tensorflow_backend     # DTensor's relayouts
def test_backend_relays_the_constrained_blob_out_to_its_layout(mesh_name, nd_sbp):
    from tensorflow.experimental import dtensor

    mesh = MESHES[mesh_name]
    use("consistent", mesh=mesh)
    constrained = mlp(nd_sbp)
    fit(constrained)
    spec = [dtensor.UNSHARDED] * 2
    for axis, s in zip(mesh, nd_sbp):
        if s != B:
            spec[s.axis] = axis
    layout = dtensor.Layout(spec, constrained.trainer.step("train").runtime.mesh).to_string()
    assert relayouts(constrained)[layout, (BATCH, 32)] >= 1, relayouts(constrained)
    free = mlp()
    fit(free)
    assert not relayouts(free)[layout, (BATCH, 32)], relayouts(free)


MISTAKES = {
    "one_entry_for_two_axes": ((S(0),), ["Blob 'hidden/relu'", "expected 2 SBP value(s)", "['data', 'model']",
                                          "received (S(0),)", "one flow.sbp value"]),
    "split_axis_out_of_range": ((S(2), B), ["Blob 'hidden/relu'", "S(2) on mesh axis 'data'", "in [0, 2)",
                                            "received axis 2", "split one of the Blob's dims"]),
    "split_not_dividing": ((B, S(1)), ["Blob 'hidden/relu'", "S(1) on mesh axis 'model' of size 2", "divides by 2",
                                       "dim 1 of size 5", "broadcast on that axis"]),
    "one_dim_on_two_axes": ((S(0), S(0)), ["Blob 'hidden/relu'", "at most one mesh axis", "received (S(0), S(0))",
                                           "dim 0", "split another dim"]),
}


@pytest.mark.parametrize("case", sorted(MISTAKES))
def test_mistake_is_named_and_the_model_trains_on(case):
    if flow.config.backend_name() == "tensorflow":
        assert not splits_dim_over_several_axes()      # DTensor: one mesh axis per tensor dim
    if case == "one_dim_on_two_axes" and splits_dim_over_several_axes():
        pytest.skip(f"backend {flow.config.backend_name()!r} splits a dim over several mesh axes: no mistake there "
                    f"(test_one_dim_split_over_two_axes_trains_to_one_device_weights)")
    mistake, named = MISTAKES[case]
    use("consistent", mesh=MESHES["2x2"])
    undisturbed = fit(mlp(hidden=5))
    weights = fit(mlp(hidden=5, mistake=mistake))
    missing = [w for w in named if w not in mlp.error]
    assert not missing, (missing, mlp.error)
    for got, want in zip(weights, undisturbed):
        np.testing.assert_array_equal(got, want)


def test_one_dim_split_over_two_axes_trains_to_one_device_weights():
    """``(S(0), S(0))`` on the 2x2 mesh: the hidden activation's rows split over all 4 devices, a quarter each."""
    if not splits_dim_over_several_axes():
        pytest.skip(f"backend {flow.config.backend_name()!r} gives each tensor dim one mesh axis: a mistake there "
                    f"(test_mistake_is_named_and_the_model_trains_on[one_dim_on_two_axes])")
    use("mirrored", 1)
    reference = fit(mlp())
    use("consistent", mesh=MESHES["2x2"])
    model = mlp((S(0), S(0)))
    weights = fit(model)
    assert mlp.hidden.sbp == (S(0), S(0))
    for got, want in zip(weights, reference):
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


def test_constraint_in_the_mirrored_view_is_named():
    use("mirrored", 2)
    undisturbed = fit(mlp())
    weights = fit(mlp(mistake=(S(0),)))
    for words in ("Blob 'hidden/relu'.with_sbp", "consistent view only", "mirrored", "set_view('consistent')"):
        assert words in mlp.error, mlp.error
    for got, want in zip(weights, undisturbed):
        np.testing.assert_array_equal(got, want)
