"""Boxing: the collective the planner names for each SBP conversion and the bytes it charges per step.

Pure planner (flowlayers/parallel/plan.py ``_boxing`` and boxing.cost), figures computed by hand from the ring
costs in boxing.py: for a tensor of ``size`` bytes over ``n`` devices, all-gather and reduce-scatter send
``(n-1)/n * size`` per device, all-reduce twice that, all-to-all ``(n-1)/n/n * size``; a local slice or
zero-fill a token ``1e-3 * size / n``.  On a 2-D mesh each axis's collective moves the tensor as split over
the other axes.  The last test reads the same figures back from a model's parallel_plan().
"""
import pytest

import flowlayers as flow
from flowlayers import dtypes
from flowlayers.parallel import boxing
from flowlayers.parallel.plan import _boxing
from flowlayers.sbp import B, P, S

SHAPE = (8, 16)          # float32: 512 bytes
SIZE = 512

# (src, dst): collective, bytes per device on a 4-device axis
ONE_AXIS = {
    (S(0), B): ("all-gather", 3 / 4 * SIZE),                 # 384
    (P, B): ("all-reduce", 2 * 3 / 4 * SIZE),                # 768
    (P, S(1)): ("reduce-scatter", 3 / 4 * SIZE),             # 384
    (S(0), S(1)): ("all-to-all", 3 / 4 / 4 * SIZE),          # 96
    (B, S(0)): ("slice", 1e-3 * SIZE / 4),                   # 0.128: nothing moves
    (B, P): ("zero-fill", 1e-3 * SIZE / 4),
}


@pytest.mark.parametrize("src,dst", list(ONE_AXIS), ids=[f"{s}->{d}" for s, d in ONE_AXIS])
def test_one_axis_conversion_names_its_collective_and_bytes(src, dst):
    kind, bytes_ = ONE_AXIS[src, dst]
    assert boxing.collective(src, dst) == kind
    assert boxing.cost(src, dst, SIZE, 4) == pytest.approx(bytes_)
    box = _boxing("producer", "consumer", (src,), (dst,), SHAPE, dtypes.float32, [("data", 4)])
    assert box.collectives == (("data", kind),)
    assert box.bytes_per_step == pytest.approx(bytes_)
    assert box.src == (src,) and box.dst == (dst,) and box.phase == "forward"


def test_nothing_to_convert_costs_nothing():
    assert boxing.collective(S(1), S(1)) is None and boxing.cost(P, B, SIZE, 1) == 0.0
    box = _boxing("p", "c", (S(0), B), (S(0), B), SHAPE, dtypes.float32, [("data", 2), ("model", 2)])
    assert box.collectives == () and box.bytes_per_step == 0.0


def test_unknown_batch_is_priced_at_the_nominal_batch():
    assert boxing.nbytes((None, 16), dtypes.float32) == boxing.NOMINAL_BATCH * 16 * 4 == 4096
    box = _boxing("p", "c", (P,), (B,), (None, 16), dtypes.float32, [("data", 2)])
    assert box.bytes_per_step == 4096          # all-reduce over 2: 2 * 1/2 * 4096


# nd-SBP on a 2x2 data x model mesh, the same 512-byte tensor: (src, dst) -> collectives, bytes
TWO_AXES = {
    # model all-reduces a tensor already split over data: 256 bytes local, 2 * 1/2 * 256
    ((S(0), P), (S(0), B)): ((("model", "all-reduce"),), 256.0),
    # each axis gathers the half the other axis splits: 2 * (1/2 * 256)
    ((S(0), S(1)), (B, B)): ((("data", "all-gather"), ("model", "all-gather")), 256.0),
    # data reduce-scatters the model-split half: 1/2 * 256
    ((P, S(1)), (S(0), S(1))): ((("data", "reduce-scatter"),), 128.0),
    # data slices the whole tensor locally (1e-3 * 512 / 2), model all-reduces it whole (2 * 1/2 * 512)
    ((B, P), (S(0), B)): ((("data", "slice"), ("model", "all-reduce")), 512.256),
    # an all-to-all on model of the data-split half: 1/2 / 2 * 256
    ((S(0), S(1)), (S(0), S(0))): ((("model", "all-to-all"),), 64.0),
}


@pytest.mark.parametrize("src,dst", list(TWO_AXES), ids=[f"{s}->{d}" for s, d in TWO_AXES])
def test_nd_sbp_boxes_axis_by_axis(src, dst):
    collectives, bytes_ = TWO_AXES[src, dst]
    box = _boxing("p", "c", src, dst, SHAPE, dtypes.float32, [("data", 2), ("model", 2)])
    assert box.collectives == collectives
    assert box.bytes_per_step == pytest.approx(bytes_)


MEGATRON = {"^hidden/kernel$": (None, "model"), "^hidden/bias$": ("model",), "^out/kernel$": ("model", None)}


def test_model_plan_lists_its_boxing_with_bytes():
    """Megatron's MLP (16 -> 32 -> 10, batch 32) on data=2 x model=2: the row-split second layer's partial sums
    are all-reduced over model (the (32, 10) float32 output, 1,280 bytes, split over data: 640 local, 2 * 1/2 *
    640 sent); every gradient is all-reduced over data, as split over model (2 * 1/2 * its local bytes)."""
    flow.config.set_view("consistent")
    flow.config.gpu_device_num(4)
    flow.config.set_mesh(data=2, model=2)
    flow.config.set_layout_rules(MEGATRON)
    x = flow.Input((16,))
    h = flow.layers.Dense(32, activation="relu", name="hidden")(x)
    model = flow.Model(x, flow.layers.Dense(10, name="out")(h))
    model.compile(optimizer=flow.optimizers.SGD(0.1), loss=flow.losses.SparseCategoricalCrossentropy(from_logits=True))
    plan = model.parallel_plan(batch_size=32)
    got = sorted((b.producer, b.consumer, b.src, b.dst, b.collectives, round(b.bytes_per_step, 3), b.phase)
                 for b in plan.boxing)
    data_all_reduce = (("data", "all-reduce"),)
    assert got == sorted([
        ("out/matmul", "out/bias_add", (S(0), P), (S(0), B), (("model", "all-reduce"),), 640.0, "forward"),
        # hidden/kernel (16, 32): 2,048 bytes, 1,024 per model shard
        ("grad of hidden/matmul", "hidden/kernel (optimizer)", (P, S(1)), (B, S(1)), data_all_reduce, 1024.0,
         "backward"),
        ("grad of hidden/bias_add", "hidden/bias (optimizer)", (P, S(0)), (B, S(0)), data_all_reduce, 64.0,
         "backward"),
        ("grad of out/matmul", "out/kernel (optimizer)", (P, S(0)), (B, S(0)), data_all_reduce, 640.0, "backward"),
        ("grad of out/bias_add", "out/bias (optimizer)", (P, B), (B, B), data_all_reduce, 40.0, "backward"),
    ]), str(plan)
    assert plan.comm_bytes_per_step == pytest.approx(640 + 1024 + 64 + 640 + 40)
    assert "Communication per step: 2,408 bytes per device" in str(plan)
