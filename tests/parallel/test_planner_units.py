"""Small facts of the planner, each pinned where a wrong one would change plans only rarely (so the end-to-end
tests would not notice): the family rules' signatures, what a split may divide, and what a Boxing costs."""
import numpy as np
import pytest

import flowlayers as flow
from flowlayers.framework.op_def import Signature
from flowlayers.ops import rules
from flowlayers.parallel import boxing, propagate
from flowlayers.sbp import Split, broadcast as B, partial_sum as P


class Spec:
    def __init__(self, *shape):
        self.shape, self.ndim = shape, len(shape)


def test_batch_only_splits_the_first_input_along_its_batch_by_default():
    sigs = rules.batch_only([Spec(4, 3), Spec(3)], {})
    assert sigs == [Signature((Split(0), B), (Split(0),)), Signature((B, B), (B,))]
    assert rules.batch_only([Spec(4, 3)], {}, n_out=2, keep_axes=(0, 1))[1] == Signature((Split(1),),
                                                                                       (Split(1), Split(1)))


def test_pointwise_splits_shared_axes_and_keeps_partial_patterns():
    sigs = rules.pointwise([Spec(4, 6), Spec(6)], (4, 6), partial=[(P, B)])
    assert Signature((Split(0), B), (Split(0),)) in sigs and Signature((Split(1), Split(0)), (Split(1),)) in sigs
    assert sigs[-2:] == [Signature((B, B), (B,)), Signature((P, B), (P,))]


def test_a_split_divides_only_existing_dims_evenly():
    assert propagate._divides(Split(1), (4, 6), 2) and propagate._divides(B, (4, 6), 4)
    assert not propagate._divides(Split(1), (4, 6), 4)
    assert not propagate._divides(Split(2), (4, 6), 2)          # no dim 2: illegal, not an IndexError
    assert propagate._divides(Split(0), (None, 6), 4)           # an unknown batch: decided when fed


@pytest.mark.parametrize("src, dst, latency", [
    (B, Split(0), 0.0),                       # a local slice: no collective, no latency
    (Split(0), B, propagate.LATENCY_BYTES),   # an all-gather
    (P, B, propagate.LATENCY_BYTES),          # an all-reduce
])
def test_only_real_collectives_pay_the_latency(src, dst, latency):
    size, n = 4096, 2
    assert propagate._cost(src, dst, size, n) == boxing.cost(src, dst, size, n) + latency
    assert propagate._cost(src, dst, size, 1) == boxing.cost(src, dst, size, 1)      # one device: nothing to start


def test_incompatible_shapes_do_not_broadcast():
    with pytest.raises(flow.ShapeError, match=r"expected shapes that broadcast, received \(None, 3\) and \(None, 4\)"):
        flow.math.add(flow.Input((3,)), flow.Input((4,)))
    assert flow.math.add(flow.Input((3,)), flow.Input((1,))).shape == (None, 3)


def test_abs_and_negative_take_integers():
    x = flow.Input((3,), dtype=flow.int32)
    model = flow.Model(x, [flow.math.abs(x), -x])
    import numpy as np
    got = model.predict(np.array([[-2, 0, 5]], np.int32), verbose=0)
    assert got[0].tolist() == [[2, 0, 5]] and got[1].tolist() == [[2, 0, -5]]


def test_an_unknown_dim_broadcasts_to_the_known_one():
    x = flow.Input((3,))                                      # (None, 3)
    y = flow.math.add(x, flow.constant(np.ones((4, 1), np.float32)))
    assert y.shape == (4, 3)                                  # the unknown batch meets 4: 4 (or an error when fed)


@pytest.mark.parametrize("name", ["identity", "negative"])
def test_linear_unary_ops_pass_partial_sums_through(name):
    from flowlayers.ops import elementwise

    sigs = elementwise.UNARY[name].signatures([Spec(4, 6)], {})
    assert Signature((P,), (P,)) in sigs
    assert Signature((P,), (P,)) not in elementwise.UNARY["relu"].signatures([Spec(4, 6)], {})
