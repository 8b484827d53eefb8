"""Initial values: the same numbers for a variable path and seed in every view and device count, for float and
integer variables alike (an int variable filled by a constant initializer failed to draw)."""
import numpy as np
import pytest

import flowlayers as flow
from flowlayers.framework.variable import store

PLACES = [("mirrored", 1), ("mirrored", 2), ("consistent", 2)]


def initial_values(view, n):
    flow.clear_session()
    flow.config.set_view(view)
    flow.config.gpu_device_num(n)

    @flow.global_function(type="predict")
    def job():
        count = flow.get_variable("count", (4,), dtype=flow.int32, initializer=flow.constant_initializer(3),
                                  trainable=False)
        ids = flow.get_variable("ids", (2, 2), dtype=flow.int64, initializer=flow.zeros_initializer(), trainable=False)
        w = flow.get_variable("w", (4, 6), initializer=flow.random_normal_initializer(stddev=0.5))
        return count, ids, w

    job()
    return {p: v.numpy() for p, v in store.variables.items()}


@pytest.mark.parametrize("view,n", PLACES)
def test_initial_values_match_one_device_for_every_dtype(view, n):
    values, reference = initial_values(view, n), initial_values("mirrored", 1)
    assert values["count"].dtype == np.int32 and np.array_equal(values["count"], [3, 3, 3, 3])
    assert values["ids"].dtype == np.int64 and not values["ids"].any()
    assert values["w"].std() > 0.1
    for path in reference:
        assert np.array_equal(values[path], reference[path]), path
