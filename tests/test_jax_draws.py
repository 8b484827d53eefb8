"""The jax backend draws the initial values of the variables waiting to be drawn in one program (Draws): the same
numbers as each drawn alone, and the program kept for the next model of the same kinds of variable."""
import pytest

import flowlayers as flow

pytestmark = pytest.mark.skipif(flow.config.backend_name() != "jax", reason="about the jax backend")


def _spec(i, shape, dtype, sampler):
    from flowlayers.contract import VariableSpec

    return VariableSpec(f"v{i}", shape, dtype, True, sampler, (3 * i + 1, 1000 + i), None, None)


def test_variables_drawn_together_in_one_program_equal_each_drawn_alone_bit_for_bit():
    """The jax backend draws every variable waiting in one program (float32 samples from one hash over all their
    elements, the others by kind): each equals jax.random's draw of its own key and shape, alone, in its sharding."""
    import functools

    import jax
    import numpy as np
    from jax.sharding import Mesh, NamedSharding, PartitionSpec

    from flowlayers_jax.dtypes import jax_dtype
    from flowlayers_jax.variables import Draws, draw

    samplers = [("uniform", {"minval": -0.3, "maxval": 0.2}), ("normal", {"mean": 0.5, "stddev": 2.0}),
                ("truncated_normal", {"mean": 0.0, "stddev": 0.1}), ("constant", {"value": 1.0})]
    specs = [_spec(i, shape, dtype, sampler) for i, (shape, dtype, sampler) in enumerate(
        (shape, dtype, sampler) for sampler in samplers for shape in [(4, 6), (4, 6), (5,)]
        for dtype in [flow.float32, flow.bfloat16, flow.float64])]
    specs.append(_spec(99, (3, 2), flow.int32, ("uniform", {"minval": 0, "maxval": 50})))
    mesh = Mesh(np.array(jax.devices()[:2]), ["data"])
    shardings = [NamedSharding(mesh, PartitionSpec("data") if s.shape[0] % 2 == 0 else PartitionSpec())
                 for s in specs]
    draws = Draws(lambda seeds: seeds)
    boxes = [draws.box(s, sh) for s, sh in zip(specs, shardings)]
    for box, spec, sharding in zip(boxes, specs, shardings):
        alone = jax.jit(functools.partial(draw, spec.sampler, spec.shape, jax_dtype(spec.dtype)))(
            np.asarray(spec.seed, np.uint32))
        assert box.value.sharding == sharding
        assert np.asarray(box.value).tobytes() == np.asarray(alone).tobytes(), spec
    assert draws.programs() == 1


def test_a_model_built_again_draws_its_variables_with_the_program_made_for_the_first():
    """The draw program is kept per list of kinds of variable: the same model built again (the same paths, hence
    the same seeds) compiles nothing to draw its variables, and draws the same numbers."""
    import jax
    import numpy as np

    from flowlayers import engine

    def weights():
        flow.clear_session()
        x = flow.Input((6,))
        model = flow.Model(x, flow.layers.Dense(3)(flow.layers.Dense(5, activation="relu")(x)))
        return model.get_weights()

    first = weights()
    runtime = engine.runtime(engine.placement())
    made = runtime.waiting.programs()
    compiles = []
    listen = lambda event, seconds, **_: compiles.append(event) if event.endswith("backend_compile_duration") \
        else None
    jax.monitoring.register_event_duration_secs_listener(listen)
    try:
        second = weights()
    finally:
        jax.monitoring.unregister_event_duration_listener(listen)
    assert runtime.waiting.programs() == made and compiles == []
    assert all(np.array_equal(a, b) for a, b in zip(first, second)) and len(first) == 4
