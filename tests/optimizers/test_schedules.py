"""``flow.optimizers.schedules`` against Keras 3's: the same rate at every step, the same configs (each side
reads the other's), Keras' refusals as named errors; and Keras' optimizer names flowlayers lacks, refused by
name."""
import copy

import keras
import numpy as np
import pytest

import flowlayers as flow

S, KS = flow.optimizers.schedules, keras.optimizers.schedules
CASES = {
    "exponential": ("ExponentialDecay", (0.1, 7, 0.63), {}),
    "exponential-staircase": ("ExponentialDecay", (0.1, 7, 0.63), {"staircase": True}),
    "piecewise": ("PiecewiseConstantDecay", ([3, 8], [0.1, 0.05, 0.01]), {}),
    "polynomial": ("PolynomialDecay", (0.1, 9), {"end_learning_rate": 0.003, "power": 2.3}),
    "polynomial-cycle": ("PolynomialDecay", (0.1, 9), {"power": 0.7, "cycle": True}),
    "inverse-time": ("InverseTimeDecay", (0.1, 3, 0.7), {}),
    "inverse-time-staircase": ("InverseTimeDecay", (0.1, 3, 0.7), {"staircase": True}),
    "cosine": ("CosineDecay", (0.1, 11), {"alpha": 0.1}),
    "cosine-warmup": ("CosineDecay", (0.01, 11), {"warmup_target": 0.1, "warmup_steps": 5, "alpha": 0.3}),
    "restarts": ("CosineDecayRestarts", (0.1, 4), {}),
    "restarts-constant-period": ("CosineDecayRestarts", (0.1, 4), {"t_mul": 1.0, "m_mul": 0.5, "alpha": 0.2}),
    "restarts-growing": ("CosineDecayRestarts", (0.1, 3), {"t_mul": 1.5, "m_mul": 0.8, "alpha": 0.1}),
}


def pair(case):
    name, args, kwargs = CASES[case]
    return getattr(S, name)(*args, **kwargs), getattr(KS, name)(*args, **kwargs)


@pytest.mark.parametrize("case", sorted(CASES))
def test_schedule_rates_are_keras_float32_rates(case):
    ours, theirs = pair(case)
    got = np.array([ours(step) for step in range(40)])
    want = np.array([np.float32(theirs(step)) for step in range(40)])
    assert got.dtype == np.float32 and len(set(want.tolist())) > 1
    np.testing.assert_allclose(got, want, rtol=1e-7, atol=0)


@pytest.mark.parametrize("case", sorted(CASES))
def test_schedule_configs_read_both_ways(case):
    ours, theirs = pair(case)
    written = S.serialize(ours)
    assert written == KS.serialize(theirs)
    from_keras = S.deserialize(KS.serialize(theirs))
    assert type(from_keras) is type(ours) and from_keras.get_config() == ours.get_config()
    to_keras = KS.deserialize(written)
    assert [np.float32(to_keras(s)) for s in range(12)] == [ours(s) for s in range(12)]


def test_optimizer_with_a_schedule_serializes_as_keras_reads_it():
    schedule = S.ExponentialDecay(0.1, 5, 0.5)
    written = flow.optimizers.serialize(flow.optimizers.Adagrad(schedule, epsilon=1e-3))
    theirs = keras.optimizers.deserialize(copy.deepcopy(written))     # Keras rewrites the dict it reads
    assert type(theirs) is keras.optimizers.Adagrad and float(theirs.learning_rate) == pytest.approx(0.1)
    again = flow.optimizers.deserialize(written)
    assert type(again) is flow.optimizers.Adagrad and again.epsilon == 1e-3
    assert again.learning_rate.get_config() == schedule.get_config()


@pytest.mark.parametrize("build, message", [
    (lambda: S.ExponentialDecay(0.1, 0, 0.5), r"ExponentialDecay: decay_steps expected a number > 0, received 0"),
    (lambda: S.CosineDecay(0.1, -3), r"CosineDecay: decay_steps expected a number > 0, received -3"),
    (lambda: S.CosineDecayRestarts(0.1, 0), r"CosineDecayRestarts: first_decay_steps expected a number > 0"),
    (lambda: S.PolynomialDecay(0.1, 0), r"PolynomialDecay: decay_steps expected a number > 0"),
    (lambda: S.InverseTimeDecay(0.1, 0, 0.5), r"InverseTimeDecay: decay_steps expected a number > 0"),
    (lambda: S.PiecewiseConstantDecay([1, 2], [0.1, 0.2]), r"PiecewiseConstantDecay: expected one boundary fewer "
                                                             r"than values, received boundaries=\[1, 2\] \(2\)"),
    (lambda: S.ExponentialDecay("0.1", 5, 0.5), r"initial_learning_rate expected a number, received '0.1'"),
    (lambda: S.deserialize({"class_name": "Warmup", "config": {}}), r"schedules.deserialize: expected one of "),
    (lambda: flow.optimizers.Ftrl(learning_rate_power=0.5), r"Ftrl: learning_rate_power expected a number <= 0, "
                                                             r"received 0.5"),
    (lambda: flow.optimizers.Ftrl(l1_regularization_strength=-1), r"Ftrl: l1_regularization_strength expected a "
                                                                   r"number >= 0"),
    (lambda: flow.optimizers.Lion(beta_1=0.0), r"Lion: beta_1 expected a number in \(0, 1\]"),
    (lambda: flow.optimizers.Adagrad(initial_accumulator_value=-1), r"Adagrad: initial_accumulator_value "
                                                                     r"expected a number >= 0, received -1"),
    (lambda: flow.optimizers.Nadam(gradient_accumulation_steps=2), r"Nadam: gradient_accumulation_steps=2 is not "
                                                                    r"supported"),
    (lambda: flow.optimizers.LossScaleOptimizer(flow.optimizers.Nadam()), r"LossScaleOptimizer: an inner "
                                                                          r"optimizer with state of its own"),
])
def test_wrong_arguments_are_named(build, message):
    with pytest.raises(flow.ConfigError, match=message):
        build()


@pytest.mark.parametrize("name", ["Lamb", "Adafactor", "Muon", "ScheduleFreeAdamW", "MultiOptimizer",
                                  "OptimizerMap", "legacy"])
def test_keras_optimizers_flowlayers_lacks_are_refused_by_name(name):
    assert hasattr(keras.optimizers, name)
    with pytest.raises(flow.ConfigError, match=rf"flow.optimizers.{name}: Keras 3's keras.optimizers.{name} is not "
                                               rf"in flowlayers; "):
        getattr(flow.optimizers, name)
    with pytest.raises(AttributeError):
        flow.optimizers.NotAnOptimizer
