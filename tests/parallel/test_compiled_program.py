"""``parallel_plan().compiled_program()``: the program the engine compiled for a plan's step.

On the jax backend the consistent view pins every planned S and B with a sharding constraint, holds a partial
sum the plan keeps over one axis as stacked partial values, and leaves any other to XLA's partitioner; these
tests read XLA's optimized program and check that the collectives it placed are the plan's Boxing: the same kind,
over the same mesh axis, on a tensor of the same size, and no other (besides the loss's scalar sums).
"""
import re

import numpy as np
import pytest

import flowlayers as flow
from flowlayers.parallel import report
from flowlayers.parallel.boxing import LOCAL
from flowlayers.sbp import Split, partial_sum

KIND = r"(all-reduce|reduce-scatter|all-gather|all-to-all|collective-permute)(?:-start)?"


def mlp(*hidden):
    x = flow.Input((24,))
    h = x
    for width in hidden:
        h = flow.layers.Dense(width, activation="relu")(h)
    return flow.Model(x, flow.layers.Dense(10)(h))


def lenet():
    x = flow.Input((12, 12, 1))
    h = flow.layers.Conv2D(8, 3, activation="relu")(x)
    h = flow.layers.MaxPool2D(2)(h)
    return flow.Model(x, flow.layers.Dense(10)(flow.layers.Flatten()(h)))


def attention():
    x = flow.Input((6, 16))
    h = flow.layers.MultiHeadAttention(num_heads=2, key_dim=8)(x, x)
    h = flow.layers.LayerNormalization()(flow.layers.Add()([x, h]))
    return flow.Model(x, flow.layers.Dense(10)(flow.layers.Flatten()(h)))


def language_model():
    x = flow.Input((6,), dtype="int32")
    h = flow.layers.Embedding(40, 16, name="token_embedding")(x)
    return flow.Model(x, flow.layers.Dense(40, name="lm_head")(h))


MEGATRON = {r"^dense/kernel$": (None, "model"), r"^dense/bias$": ("model",), r"^dense_1/kernel$": ("model", None)}
CASES = {
    "data parallel, data=4": ("consistent", {"data": 4}, lambda: mlp(32), {}),
    "conv data parallel, data=4": ("consistent", {"data": 4}, lenet, {}),
    "megatron MLP, data=2 model=2": ("consistent", {"data": 2, "model": 2}, lambda: mlp(32), MEGATRON),
    "column split, model=4": ("consistent", {"model": 4}, lambda: mlp(32),
                              {r"^dense/kernel$": (None, "model"), r"^dense/bias$": ("model",)}),
    "ZeRO, data=4": ("consistent", {"data": 4}, lambda: mlp(32, 32), "zero"),
    "attention heads split, data=2 model=2": ("consistent", {"data": 2, "model": 2}, attention,
                                              flow.parallel.attention_rules()),
    "vocabulary split, data=2 model=2": ("consistent", {"data": 2, "model": 2}, language_model,
                                         flow.parallel.vocab_rules()),
    "mirrored, 4 replicas": ("mirrored", None, lambda: mlp(32), {}),
}


def compiled(case, batch=16):
    view, mesh, build, rules = CASES[case]
    flow.clear_session()
    flow.config.set_view(view)
    flow.config.gpu_device_num(4)
    if mesh:
        flow.config.set_mesh(**mesh)
    model = build()
    flow.config.set_layout_rules(flow.parallel.zero_rules(model) if rules == "zero" else rules)
    model.compile(flow.optimizers.SGD(0.1, momentum=0.9),
                  flow.losses.SparseCategoricalCrossentropy(from_logits=True))
    plan = model.parallel_plan(batch)
    return model, plan, plan.compiled_program()


def planned(plan, platform):
    """``(kind, axis, elements)`` of every collective of the plan's Boxing: the tensor it reduces, gathers or
    exchanges, as each device holds it whole over the axis (split over the others), read back from the ring cost.
    On CPUs a reduce-scatter is an all-reduce (then a slice): XLA's partitioner writes P -> S so, and the pass that
    makes the pair a reduce-scatter (``ReduceScatterCreator``) is in XLA's GPU pipeline only."""
    out = []
    sizes = dict(plan.axes)
    for b in plan.boxing:
        moved = [(axis, kind) for axis, kind in b.collectives if kind not in LOCAL]
        assert len(moved) <= 1, f"{b}: one collective per Boxing in these cases"
        for axis, kind in moved:
            n = sizes[axis]
            share = {"all-reduce": 2 * (n - 1) / n, "all-gather": (n - 1) / n, "reduce-scatter": (n - 1) / n,
                     "all-to-all": (n - 1) / n / n}[kind]
            elements = round(b.bytes_per_step / share / 4)      # float32 models
            out.append(("all-reduce" if kind == "reduce-scatter" and platform == "cpu" else kind, axis, elements))
    return sorted(c for c in out + returned(plan) if c[2] > 1)     # scalars aside, as in the engine's


def returned(plan):
    """The all-reduce of each value the step returns that the plan leaves a partial sum (the host reads it
    whole): the Boxing of a returned value is not among the plan's."""
    compiled = plan._compiled
    nd_of, out = compiled.plan(plan.batch).sbp, []
    for blob in compiled.program.results:
        nd = nd_of[blob]
        split = int(np.prod([n for (_, n), s in zip(plan.axes, nd) if isinstance(s, Split)]))
        out += [("all-reduce", axis, int(np.prod(blob.shape)) // split)
                for (axis, _), s in zip(plan.axes, nd) if s == partial_sum]
    return out


def engine_collectives(text, axes):
    """``(kind, axis, elements)`` of every collective in XLA's program text over a mesh of ``axes`` (in order):
    a tuple all-reduce (XLA combines them) counts once per operand; the elements are of the whole tensor
    reduced or gathered (a reduce-scatter's result times its group)."""
    names = [a for a, _ in axes]
    shape = [n for _, n in axes]
    out = []
    for line in text.splitlines():
        found = re.match(r"\s*(?:ROOT )?%\S+ = (.+?) " + KIND + r"\(", line)
        if not found:
            continue
        result, kind = found.groups()
        axis = _group_axis(re.search(r"replica_groups=(.+?), (?:use_global|to_apply|dimensions|channel|metadata)",
                                     line).group(1), names, shape)
        group = int(np.prod([dict(axes)[a] for a in axis.split(",")]))
        pieces = [int(np.prod([int(d) for d in dims.split(",") if d]))
                  for dims in re.findall(r"[a-z]+[0-9]*\[([0-9,]*)\]", result)]
        if kind == "all-to-all":        # one exchange of the blocks of one tensor (a tuple: one per peer)
            out.append((kind, axis, sum(pieces) * group))
        else:
            out += [(kind, axis, p * (group if kind == "reduce-scatter" else 1)) for p in pieces]
    return sorted(out)


def _group_axis(groups, names, shape):
    """The mesh axes (joined by commas) that a collective's replica groups span."""
    coords = np.array(np.unravel_index(_first_group(groups), shape)).T
    return ",".join(names[i] for i in range(len(names)) if len(set(coords[:, i])) > 1)


def _first_group(groups):
    """The device ids of a collective's first replica group, from XLA's ways of writing the groups: listed
    (``{{0,1},{2,3}}``), as an iota (``[2,2]<=[4]``, ``[2,2]<=[2,2]T(1,0)``), or as axes of a mesh of the devices
    (``mesh['axis_0'=2,'axis_1'=2], device_ids=([2,2]T(1,0)) {'axis_0'}``: the devices in the order given, else
    in order; a group spans the axes named last)."""
    named = re.match(r"mesh\[(.*?)\](?:, device_ids=\((.*?)\))? \{(.*?)\}", groups)
    if named:
        sizes = [int(n) for n in re.findall(r"'axis_\d+'=(\d+)", named.group(1))]
        spanned = {int(a) for a in re.findall(r"'axis_(\d+)'", named.group(3))}
        devices = _iota(named.group(2)).ravel() if named.group(2) else np.arange(int(np.prod(sizes)))
        positions = np.arange(len(devices)).reshape(sizes)[tuple(slice(None) if i in spanned else 0
                                                                 for i in range(len(sizes)))]
        return devices[positions.ravel()]
    if groups.startswith("["):
        return _iota(groups)[0]
    return [int(d) for d in re.match(r"\{\{([0-9,]+)\}", groups).group(1).split(",")]


def _iota(text):
    """``[a,b]<=[dims]T(perm)`` (``<=[dims]`` left out: the shape itself): the device ids 0, 1, ... laid out as
    ``dims``, transposed by ``perm``, as an ``a x b`` array."""
    shape, dims, perm = re.match(r"\[([0-9,]+)\](?:<=\[([0-9,]+)\])?(?:T\(([0-9,]+)\))?", text).groups()
    shape = [int(d) for d in shape.split(",")]
    dims = [int(d) for d in dims.split(",")] if dims else shape
    ids = np.arange(int(np.prod(dims))).reshape(dims)
    return (ids.transpose([int(p) for p in perm.split(",")]) if perm else ids).reshape(shape)


@pytest.mark.jax_backend     # reads XLA's program
@pytest.mark.parametrize("case", list(CASES))
def test_the_collectives_xla_places_are_the_plans_boxing(case):
    import jax

    model, plan, text = compiled(case)
    engine = [c for c in engine_collectives(text, plan.axes) if c[2] > 1]    # the loss's scalar sums aside
    want = planned(plan, jax.devices()[0].platform)
    assert engine == want, f"{case}: XLA placed {engine}; the plan lists {want}\n{plan}"


# op of test_signatures' matrix, mesh: every signature of the op tried at once, those with partial-sum inputs
# made by a matmul over a split contraction (and kept so through the op, where the plan says so)
KEPT_PARTIALS = [("identity", "2"), ("add", "2x2"), ("multiply", "2"), ("divide", "2"), ("reduce_sum", "2x2"),
                 ("reduce_mean", "2"), ("matmul", "2"), ("einsum_projection", "2"), ("einsum_sum", "2x2"),
                 ("reshape", "2x2"), ("transpose", "2"), ("concat", "2x2"), ("pad", "2"), ("gather", "2")]


@pytest.mark.jax_backend     # reads XLA's program
@pytest.mark.parametrize("name, mesh", KEPT_PARTIALS)
def test_a_partial_sum_the_plan_keeps_is_reduced_where_the_plan_says(name, mesh):
    """A partial sum kept through linear ops is reduced by the Boxing after them, on the tensor there (one
    device's partial values stacked over the axis meanwhile), not where it is made (XLA's partitioner reduces an
    unconstrained one at once)."""
    import jax
    from test_signatures import MESHES, assignments, run

    captured = []
    build = report.build
    report.build = lambda compiled, batch, **kw: captured.append(build(compiled, batch, **kw)) or captured[-1]
    try:
        run(name, assignments(name, MESHES[mesh]), MESHES[mesh], plan=[])
    finally:
        report.build = build
    plan = captured[-1]
    engine = [c for c in engine_collectives(plan.compiled_program(), plan.axes) if c[2] > 1]
    want = planned(plan, jax.devices()[0].platform)
    assert engine == want, f"{name} on {mesh}: XLA placed {engine}; the plan lists {want}\n{plan}"


@pytest.mark.jax_backend     # it shows its program
def test_a_compiled_program_is_not_run_and_an_unknown_dim_is_named():
    model, plan, _ = compiled("megatron MLP, data=2 model=2")
    before = model.get_weights()
    assert "HloModule" in plan.compiled_program()
    assert model.optimizer.iterations == 0
    assert all(np.array_equal(a, b) for a, b in zip(before, model.get_weights()))
    assert "HloModule" in mlp(8).parallel_plan(8).compiled_program()       # not compiled: the predict step
    x = flow.Input((None, 24), name="tokens")
    seq = flow.Model(x, flow.layers.Dense(10)(x))
    with pytest.raises(flow.InputError, match=r"input 'tokens' .* shape \(None, None, 24\); expected every dim"):
        seq.parallel_plan(8).compiled_program()
    model.fit(np.ones((16, 24), np.float32), np.zeros(16, np.int64), batch_size=16, verbose=0)
    assert model.optimizer.iterations == 1
    assert not np.allclose(model.get_weights()[0], before[0])


@pytest.mark.tensorflow_backend     # a backend that does not show its program
def test_a_backend_that_does_not_show_its_program_says_so():
    model = mlp(8)
    model.compile("sgd", flow.losses.SparseCategoricalCrossentropy(from_logits=True))
    with pytest.raises(flow.ConfigError, match=r"compiled_program\(\): the 'tensorflow' backend does not show"):
        model.parallel_plan(8).compiled_program()
    model.fit(np.ones((8, 24), np.float32), np.zeros(8, np.int64), batch_size=8, verbose=0)


@pytest.mark.jax_backend     # reads XLA's program
def test_a_job_functions_program_has_its_plans_collectives():
    """OneFlow's face: a hybrid-parallel train job (the second dense layer split with ``model_distribute``) on 2
    devices; its placeholders give the batch."""
    import jax

    import flowlayers.typing as tp

    flow.clear_default_session()
    flow.config.gpu_device_num(2)
    flow.config.set_view("consistent")

    @flow.global_function(type="train")
    def train_job(x: tp.Numpy.Placeholder((8, 24)), y: tp.Numpy.Placeholder((8,), dtype=flow.int32)) -> tp.Numpy:
        hidden = flow.layers.dense(x, 16, activation=flow.nn.relu, name="hidden")
        logits = flow.layers.dense(hidden, 10, name="out", model_distribute=flow.distribute.split(1))
        loss = flow.nn.sparse_softmax_cross_entropy_with_logits(y, logits)
        flow.optimizer.SGD(flow.optimizer.PiecewiseConstantScheduler([], [0.1])).minimize(loss)
        return loss

    plan = train_job.parallel_plan()
    engine = [c for c in engine_collectives(plan.compiled_program(), plan.axes) if c[2] > 1]
    assert engine == planned(plan, jax.devices()[0].platform) and engine, (engine, str(plan))
    x, y = np.ones((8, 24), np.float32), np.arange(8, dtype=np.int32)
    assert np.isfinite(train_job(x, y)).all()


def test_a_plan_made_by_hand_names_no_compiled_step():
    plan = report.ParallelPlan("consistent", [("data", 2)], 8, {}, [])
    with pytest.raises(flow.ConfigError, match=r"compiled_program\(\): this ParallelPlan was not made by "
                                                r"parallel_plan\(\), so it names no compiled step"):
        plan.compiled_program()
    assert "No Boxing" in str(plan)
