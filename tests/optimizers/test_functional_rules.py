"""The optimizer rules as a functional engine runs them (``flowlayers.optimizers.functional``: references in,
new arrays out, nothing written in place), in numpy float64 with no engine, against Keras 3's optimizers on
float64 variables: five steps of the same gradients, every rule and what Keras does first (clipping, decay)."""
import keras
import numpy as np
import pytest

import flowlayers as flow
from flowlayers.optimizers import functional

SHAPES = {"dense/kernel": (3, 4), "dense/bias": (4,)}
STEPS = 5

# Hyper-parameters exact in float32: Keras' TensorFlow backend casts a Python float to float32 before float64
# (0.9 arrives as 0.89999998), so only such numbers make Keras' float64 arithmetic the exact reference
LR, MOMENTUM, DECAY, EPS = 0.125, 0.875, 0.25, 2.0 ** -20
RULES = {
    "sgd": ({}, "SGD", {"learning_rate": LR}),
    "momentum": ({}, "SGD", {"learning_rate": LR, "momentum": MOMENTUM}),
    "nesterov": ({}, "SGD", {"learning_rate": LR, "momentum": MOMENTUM, "nesterov": True}),
    "momentum-clipnorm-decay": ({}, "SGD", {"learning_rate": LR, "momentum": MOMENTUM, "clipnorm": 0.5,
                                            "weight_decay": DECAY}),
    "sgd-global-clipnorm": ({}, "SGD", {"learning_rate": LR, "global_clipnorm": 0.75}),
    "momentum-clipvalue": ({}, "SGD", {"learning_rate": LR, "momentum": 0.5, "clipvalue": 0.25}),
    "adam": ({}, "Adam", {"learning_rate": LR, "beta_1": MOMENTUM, "beta_2": 1 - 2.0 ** -10, "epsilon": EPS}),
    "adam-clipnorm-decay": ({}, "Adam", {"learning_rate": LR, "beta_1": 0.5, "beta_2": 0.75, "epsilon": EPS,
                                         "clipnorm": 0.5, "weight_decay": DECAY}),
    "adam-global-clipnorm": ({}, "Adam", {"learning_rate": LR, "beta_1": 0.5, "beta_2": 0.75, "epsilon": EPS,
                                          "global_clipnorm": 0.75}),
    "adamw-excluding-biases": ({"exclude": ["bias"]}, "AdamW", {"learning_rate": LR, "beta_1": 0.5, "beta_2": 0.75,
                                                                "epsilon": EPS, "weight_decay": 0.5}),
    "rmsprop-momentum-centered": ({}, "RMSprop", {"learning_rate": LR, "rho": 0.75, "momentum": 0.5,
                                                  "epsilon": EPS, "centered": True}),
    "momentum-accumulating": ({}, "SGD", {"learning_rate": LR, "momentum": MOMENTUM,
                                          "gradient_accumulation_steps": 2}),
}


@pytest.mark.parametrize("rule", sorted(RULES))
def test_functional_rule_matches_keras_in_float64(rule):
    extra, cls, kwargs = RULES[rule]
    rng = np.random.default_rng(5)
    start = {path: rng.normal(size=shape) for path, shape in SHAPES.items()}
    grads = [[rng.normal(size=shape) for shape in SHAPES.values()] for _ in range(STEPS)]

    ours = getattr(flow.optimizers, cls)(**kwargs)
    theirs = getattr(keras.optimizers, cls)(**kwargs)
    variables = [flow.Variable(path, shape, flow.float64, flow.initializers.get("zeros"))
                 for path, shape in SHAPES.items()]
    reference = [keras.Variable(start[path], dtype="float64", name=path.split("/")[-1]) for path in SHAPES]
    if extra.get("exclude"):
        ours.exclude_from_weight_decay(var_names=extra["exclude"])
        theirs.exclude_from_weight_decay(var_names=extra["exclude"])

    values = [start[path] for path in SHAPES]
    slots = [[np.zeros(shape) for _ in ours.all_slot_names] for shape in SHAPES.values()]
    xp = functional.FunctionalMath(np)
    for i, g in enumerate(grads):
        before = [v.copy() for v in values]
        values, slots = functional.step(ours, xp, variables, values, g, slots, ours.current_learning_rate(), i + 1)
        ours.iterations += 1
        theirs.apply_gradients(zip([keras.ops.convert_to_tensor(x) for x in g], reference))
        for a, b, was in zip(values, reference, before):
            assert a.dtype == np.float64
            np.testing.assert_allclose(a, keras.ops.convert_to_numpy(b), rtol=0, atol=1e-12)
            if ours.is_update_step(i + 1):
                assert not np.array_equal(a, was)     # it moved, and the input arrays were left as they were


def test_a_rule_reading_a_slot_after_writing_it_reads_the_new_value():
    """References behave as in-place variables do: the read-after-write rule of tests/parallel/test_split_step.py
    gives plain momentum's numbers."""
    class ReadAfterWrite(flow.optimizers.SGD):
        def update(self, xp, var, grad, slots, lr, step):
            (m,) = slots
            xp.assign(m, self.momentum * m - lr * grad)
            xp.assign(var, var + m)

    var = flow.Variable("w", (3,), flow.float64, flow.initializers.get("zeros"))
    xp, g = functional.FunctionalMath(np), [np.array([1.0, -2.0, 0.5])]
    plain = ([np.ones(3)], [[np.zeros(3)]])
    odd = ([np.ones(3)], [[np.zeros(3)]])
    for step in (1, 2, 3):
        plain = functional.step(flow.optimizers.SGD(0.1, momentum=0.9), xp, [var], plain[0], g, plain[1], 0.1, step)
        odd = functional.step(ReadAfterWrite(0.1, momentum=0.9), xp, [var], odd[0], g, odd[1], 0.1, step)
    np.testing.assert_array_equal(plain[0][0], odd[0][0])
    assert not np.array_equal(plain[0][0], np.ones(3))
