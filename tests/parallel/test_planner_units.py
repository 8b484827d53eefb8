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


class Probe:        # a node as the planner's choice sees it
    def __init__(self, op, inputs, attrs=None):
        self.op, self.inputs, self.attrs, self.name = op, inputs, attrs or {}, op.name


class In:           # an input as the planner sees it: fed shape, dtype, SBP (one axis), whether dim 0 is the batch
    def __init__(self, shape, sbp, dtype=flow.float32, batched=False):
        self.shape, self.ndim, self.sbp, self.dtype, self.batched = shape, len(shape), (sbp,), dtype, batched


def test_a_kernels_own_collectives_are_charged_like_boxing():
    sig = Signature((B, Split(2)), (B,), ("all-reduce (max)", "all-reduce", "all-reduce"))
    specs = [((8, 16), flow.float32)]
    assert propagate.inner_bytes(sig, specs, 2) == 3 * boxing.cost(P, B, 8 * 16 * 4, 2)
    assert propagate.inner_bytes(sig, specs, 1) == 0.0
    from flowlayers.ops import nn
    labels, logits = In((8, 16), B, flow.int32), In((8, 16, 4096), Split(2))
    node = Probe(nn.SPARSE_SOFTMAX_CE, [labels, logits])
    chosen, cost = propagate.choose(node, [((8, 16), flow.float32)], 0, 2)
    assert chosen.collectives and cost == pytest.approx(propagate.inner_bytes(chosen, [((8, 16), flow.float32)], 2)
                                                      + 3 * propagate.LATENCY_BYTES)


def test_the_batch_stays_split_over_data_while_another_signature_serves():
    """A lookup in a table split over ``data`` could take the ids whole (few bytes) and return a partial sum; on the
    ``data`` axis that gathers the batch, so the table is gathered instead; on another axis the ids may go whole."""
    from flowlayers.ops import embedding
    table, ids = In((64, 512), Split(0)), In((32, 8), Split(0), flow.int32, batched=True)
    node = Probe(embedding.GATHER, [table, ids])
    specs = [((32, 8, 512), flow.float32)]
    on_data, _ = propagate.choose(node, specs, 0, 2, axis_name="data")
    assert on_data.inputs == (B, Split(0)), on_data
    ids_whole = In((32, 8), B, flow.int32, batched=True)
    on_model, _ = propagate.choose(Probe(embedding.GATHER, [table, ids_whole]), specs, 0, 2, axis_name="model")
    assert on_model == Signature((Split(0), B), (P,), temporary_bytes=on_model.temporary_bytes), on_model


def test_a_weight_is_used_as_split_or_gathered_whole_never_split_otherwise():
    """An all-to-all of a row-split table to a column split is cheaper in bytes than gathering it, but it would
    split the hidden dim of everything after the lookup; the planner gathers the table instead."""
    from flowlayers.ops import embedding
    table = In((64, 512), Split(0))
    table.weight = True
    ids = In((32, 64), B, flow.int32, batched=True)
    chosen, _ = propagate.choose(Probe(embedding.GATHER, [table, ids]), [((32, 64, 512), flow.float32)], 0, 2,
                                 axis_name="model")
    assert chosen.inputs[0] in (Split(0), B), chosen
    table.weight = False            # an activation may be re-split
    assert propagate._policy(Split(0), Split(1), table, 2, "model") == 0.0


def test_an_op_is_a_source_or_a_constraint_by_its_kind_not_its_name():
    from flowlayers.framework.op_def import OpDef
    named_like_a_source = OpDef("variable", lambda inputs, attrs: [(inputs[0].shape, inputs[0].dtype)],
                                lambda inputs, attrs: [Signature((B,), (B,))])
    assert named_like_a_source.kind == "compute" and not named_like_a_source.is_source
    with pytest.raises(flow.GraphError, match=r"OpDef 'odd': kind expected one of \('compute', 'placeholder', "
                                              r"'variable', 'constant', 'constraint'\), received 'source'"):
        OpDef("odd", None, None, kind="source")


def test_a_dim_is_split_over_several_mesh_axes_only_where_the_backend_can():
    """``Backend.splits_dim_over_several_axes``: DTensor (False) gives each tensor dim one mesh axis, so a signature
    splitting the batch over both axes of a 2x2 mesh is refused; a backend that can (JAX) gets it planned, with
    each device holding a quarter of the rows, and a dim that does not divide by all its axes is still refused."""
    from flowlayers.framework.graph import topo_sort
    from flowlayers.parallel import force_signature, plan as planner

    flow.config.set_view("consistent")
    flow.config.gpu_device_num(4)
    flow.config.set_mesh(data=2, model=2)
    x = flow.Input((4,))
    y = flow.layers.Dense(6, use_bias=False, name="d")(x)
    rows = Signature((Split(0), B), (Split(0),))
    force_signature(y, rows, rows)
    placement = flow.config.placement()

    def plan(several, batch=None):
        return planner.plan(topo_sort([y]), placement.axes, batch, None, (), planner.sources(placement),
                            several_axes=several)

    with pytest.raises(flow.SBPError, match="forced signature"):
        plan(False)
    assert plan(True, batch=8).sbp[y] == (Split(0), Split(0))
    with pytest.raises(flow.SBPError, match="forced signature"):
        plan(True, batch=6)                    # 6 rows do not split over 2 x 2 devices
    # the backend in force: a Blob constrained to the batch over both axes
    several = flow.engine.capabilities().splits_dim_over_several_axes
    if flow.config.backend_name() == "tensorflow":
        assert not several
    if not several:
        with pytest.raises(flow.SBPError, match=rf"splits dim 0 .* over two axes, which backend "
                                                rf"'{flow.config.backend_name()}' cannot"):
            x.with_sbp(Split(0), Split(0))
    else:
        assert x.with_sbp(Split(0), Split(0)).sbp == (Split(0), Split(0))
        assert flow.Input((4,), batch_size=8).with_sbp(Split(0), Split(0)).sbp == (Split(0), Split(0))
        with pytest.raises(flow.SBPError, match=r"splitting dim 0 of size 6 over 4 devices \(mesh axes \['data', "
                                                r"'model'\]\) expected a size that divides by 4, received 6"):
            flow.Input((4,), batch_size=6).with_sbp(Split(0), Split(0))
