"""LossScaleOptimizer: Keras 3's dynamic loss scaling.  A step whose gradients are not all finite changes no weight
or slot and halves the scale, in every view; the scale doubles after ``dynamic_growth_steps`` finite steps; the
scale's path through a run is Keras'; ``compile`` wraps the optimizer under ``mixed_float16``."""
import numpy as np
import pytest
from keras_runs import distance, keras_runs, mlp, train, use

import flowlayers as flow
from flowlayers.framework import checkpoint_format as checkpoint

CASE = {"policy": "mixed_float16", "features": 8, "layers": [[16, "relu", None], [16, "relu", None], [3, None, None]],
        "optimizer": {"class": "Adam", "learning_rate": 0.01}, "loss_scale": None}


def data(steps=4, batch=16, seed=0):
    rng = np.random.default_rng(seed)
    xs = rng.normal(size=(steps, batch, 8)).astype(np.float32)
    return xs, (xs[..., 0] > 0).astype(np.int32) + (xs[..., 1] > 0.5)


def state(model):
    """The weights and every slot of the optimizer, by checkpoint key."""
    slots = checkpoint.slot_variables(model.trainer.optimizers())
    return [w.numpy() for w in model.weights], {k: v.numpy() for k, v in slots.items()}


@pytest.mark.parametrize("place", ["one", "2x2", "mirrored2"])
def test_an_overflowing_batch_changes_nothing_and_halves_the_scale(place):
    use(place)
    model = mlp(CASE)             # compile wraps the Adam under mixed_float16
    assert isinstance(model.optimizer, flow.optimizers.LossScaleOptimizer)
    assert model.optimizer.name == "loss_scale_optimizer" and model.optimizer.dynamic_scale == 2.0 ** 15
    xs, ys = data()
    train(model, xs[:2], ys[:2])
    scale = model.optimizer.dynamic_scale
    weights, slots = state(model)
    model.train_on_batch(xs[2] * 3e4, ys[2])       # float16 overflows: 3e4 * a weight of about 1 is out of range
    after, after_slots = state(model)
    assert all(np.array_equal(a, b) for a, b in zip(weights, after))
    assert all(np.array_equal(slots[k], after_slots[k]) for k in slots if not k.endswith(("_scale", "_counter",
                                                                                         "_steps")))
    assert model.optimizer.dynamic_scale == scale / 2 and model.optimizer.step_counter == 0
    skipped = "loss_scale_optimizer/skipped_steps"
    assert after_slots[skipped] == slots[skipped] + 1
    model.train_on_batch(xs[3], ys[3])
    assert not all(np.array_equal(a, b) for a, b in zip(after, model.get_weights()))
    assert model.optimizer.step_counter == 1 and all(w.dtype == np.float32 for w in model.get_weights())


def test_the_scale_doubles_after_dynamic_growth_steps_and_scaling_changes_no_float32_result():
    use("2x2")
    case = {**CASE, "policy": "float32", "optimizer": {"class": "SGD", "learning_rate": 0.1},
            "loss_scale": {"initial_scale": 8.0, "dynamic_growth_steps": 3}}
    xs, ys = data(steps=7)
    model = mlp(case)
    start = model.get_weights()
    scaled, scales, counters = train(model, xs, ys)
    assert scales == [8, 8, 16, 16, 16, 32, 32] and counters == [1, 2, 0, 1, 2, 0, 1]
    use("2x2")
    plain = train(mlp({**case, "loss_scale": None}, start), xs, ys)[0]
    assert distance(scaled, plain) <= 1e-6       # a power of two scales and unscales float32 gradients exactly


@pytest.mark.slow
def test_the_scale_and_weights_follow_keras_loss_scale_optimizer(tmp_path):
    """mixed_float16 steps (one overflowing) from the same start: the scale and counter after each step are Keras'
    (KERAS_BACKEND the engine flowlayers runs on), and the weights end closer to Keras' than to float32's."""
    case = {**CASE, "optimizer": {"class": "SGD", "learning_rate": 0.1},
            "loss_scale": {"initial_scale": 2.0 ** 10, "dynamic_growth_steps": 2}}
    xs, ys = data(steps=6)
    xs[2] *= 3e4
    use("one")
    start = mlp(case).get_weights()
    (keras_weights, keras_scales, keras_counters), = keras_runs([case], [start], [(xs, ys)], tmp_path)
    assert keras_scales == [1024, 2048, 1024, 1024, 2048, 2048]       # the overflow skipped, then growth again
    for place in ("one", "2x2", "mirrored2"):
        use(place)
        ours, scales, counters = train(mlp(case, start), xs, ys)
        assert (scales, counters) == (keras_scales, keras_counters), place
        use(place)
        float32 = train(mlp({**case, "policy": "float32"}, start), xs, ys)[0]
        print(place, distance(ours, keras_weights), distance(ours, float32))
        assert distance(ours, keras_weights) < 0.75 * distance(ours, float32), place


def test_compile_wraps_only_under_mixed_float16_and_never_twice():
    use("one")
    assert isinstance(mlp(CASE).optimizer, flow.optimizers.LossScaleOptimizer)
    assert isinstance(mlp({**CASE, "policy": "mixed_bfloat16"}).optimizer, flow.optimizers.Adam)
    own = {**CASE, "loss_scale": {"initial_scale": 4.0, "dynamic_growth_steps": 10}}
    model = mlp(own)
    assert model.optimizer.initial_scale == 4.0 and isinstance(model.optimizer.inner_optimizer, flow.optimizers.Adam)
    assert flow.mixed_precision.LossScaleOptimizer is flow.optimizers.LossScaleOptimizer


@pytest.mark.parametrize("kwargs, words", [
    ({"clipnorm": 1.0}, "does not take ['clipnorm']"),
    ({"learning_rate": 0.1}, "does not take ['learning_rate']"),
    ({"dynamic": False}, "dynamic=False"),
    ({"initial_scale": 0}, "initial_scale expected a positive finite number, received 0"),
    ({"dynamic_growth_steps": 0}, "dynamic_growth_steps expected a positive int, received 0"),
    ({"momentum": 0.9}, "unexpected keyword argument(s) ['momentum']"),
])
def test_what_keras_refuses_is_refused_by_name(kwargs, words):
    with pytest.raises(flow.ConfigError) as e:
        flow.optimizers.LossScaleOptimizer(flow.optimizers.SGD(), **kwargs)
    assert words in str(e.value)


def test_an_inner_optimizer_is_required():
    for inner in ("sgd", flow.optimizers.LossScaleOptimizer(flow.optimizers.SGD()),
                  flow.optimizers.SGD(gradient_accumulation_steps=2)):
        with pytest.raises(flow.ConfigError) as e:
            flow.optimizers.LossScaleOptimizer(inner)
        assert "LossScaleOptimizer" in str(e.value)


def test_scale_loss_multiplies_by_the_scale_in_force():
    use("one")
    model = mlp(CASE)
    assert model.optimizer.scale_loss(2.0) == 2.0 ** 16
    xs, ys = data()
    model.train_on_batch(xs[0] * 3e4, ys[0])
    assert model.optimizer.scale_loss(2.0) == 2.0 ** 15
