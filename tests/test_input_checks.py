"""Checks at the edges of the front end, each at its boundary value: Input shapes and batch sizes, index ranges,
variable assignment and sharing by name, initial values drawn per variable, layout rules meant for another model,
and mesh sizes refused when set."""
import numpy as np
import pytest

import flowlayers as flow
from flowlayers.framework.variable import store


@pytest.mark.parametrize("shape", [(0,), (-3,), (3, True), (2.0,), "3"])
def test_input_shapes_are_positive_ints(shape):
    with pytest.raises(flow.ShapeError, match="shape expected a tuple of positive ints"):
        flow.Input(shape)


@pytest.mark.parametrize("batch_size", [0, -1, 2.0])
def test_input_batch_size_is_positive(batch_size):
    with pytest.raises(flow.ShapeError, match="batch_size expected a positive int or None"):
        flow.Input((3,), batch_size=batch_size)
    assert flow.Input((3,), batch_size=1).shape == (1, 3)


def test_ids_are_checked_at_the_table_size():
    ids = flow.Input((2,), dtype=flow.int32)
    model = flow.Model(ids, flow.layers.Embedding(10, 3, name="words")(ids))
    assert model.predict(np.array([[0, 9]], np.int32), verbose=0).shape == (1, 2, 3)      # the last row: fine
    with pytest.raises(flow.InputError, match=r"expected values in \[0, 10\), received values in \[0, 10\]"):
        model.predict(np.array([[0, 10]], np.int32), verbose=0)


def test_assigning_casts_numbers_of_the_same_kind_and_refuses_others():
    x = flow.Input((3,))
    model = flow.Model(x, flow.layers.Dense(2, name="d")(x))
    kernel = model.weights[0]
    kernel.assign(np.ones((3, 2), np.float64))                  # before any step: the variable is made here
    assert kernel.numpy().dtype == np.float32 and kernel.numpy().sum() == 6.0
    with pytest.raises(flow.DTypeError, match=r"variable 'd/kernel': expected a value of dtype float32, received int64"):
        kernel.assign(np.ones((3, 2), np.int64))
    with pytest.raises(flow.DTypeError, match="received <U1"):
        kernel.assign(np.full((3, 2), "a"))
    assert kernel.numpy().sum() == 6.0


def test_get_variable_shares_by_name_and_refuses_another_shape():
    first = flow.get_variable("shared", (2, 3))
    again = flow.get_variable("shared", (2, 3))
    assert first.node.variable is again.node.variable is store.variables["shared"]
    with pytest.raises(flow.ShapeError, match=r"variable 'shared': exists with shape \(2, 3\) float32, requested "
                                              r"again with shape \(3, 2\)"):
        flow.get_variable("shared", (3, 2))


def test_every_variable_draws_its_own_initial_value():
    x = flow.Input((8,))
    model = flow.Model(x, flow.layers.Dense(8)(flow.layers.Dense(8)(x)))
    first, second = model.weights[0].numpy(), model.weights[2].numpy()
    assert first.shape == second.shape and not np.allclose(first, second)
    seeds = {tuple(w.seed(0)) for w in model.weights}
    assert len(seeds) == 4 and all(0 <= s < 2 ** 31 for pair in seeds for s in pair)


def test_a_layout_rule_may_be_meant_for_another_live_model():
    flow.config.set_view("consistent")
    flow.config.gpu_device_num(2)
    flow.config.set_mesh(model=2)
    other = flow.Input((4,))
    keep = flow.Model(other, flow.layers.Dense(4, name="elsewhere")(other))   # alive: its variables may be matched
    flow.config.set_layout_rules({"elsewhere/kernel": (None, "model")})
    x = flow.Input((4,))
    model = flow.Model(x, flow.layers.Dense(2, name="here")(x))
    model.compile("sgd", "mse")
    model.fit(np.ones((4, 4), np.float32), np.ones((4, 2), np.float32), verbose=0)      # no rule error
    assert keep.parallel_plan().variables["elsewhere/kernel"].shard_shape == (4, 2)


@pytest.mark.parametrize("size", [0, -2, 1.5])
def test_mesh_sizes_are_refused_when_set(size):
    flow.config.gpu_device_num(2)
    with pytest.raises(flow.ConfigError, match=r"flow.config.set_mesh\(model=...\): expected a positive int"):
        flow.config.set_mesh(data=1, model=size)
    assert flow.config.mesh_shape() == {"data": 2}             # the refused call changed nothing
