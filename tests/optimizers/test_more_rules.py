"""Keras 3's other update rules (Adagrad, Adamax, Nadam, Adadelta, Lion, Ftrl) and a learning rate schedule against
Keras 3's own optimizers: the same model, start and batches as ``test_keras_reference``, weights within 1e-6 of
Keras' after one step and after four more, in the mirrored and the consistent view on 2 devices."""
import keras
import pytest

import flowlayers as flow

from test_keras_reference import RULES, test_rule_trains_to_keras_weights as trains_to_keras_weights

S = flow.optimizers.schedules
MORE = {
    "adagrad": (lambda: flow.optimizers.Adagrad(0.05), lambda: keras.optimizers.Adagrad(0.05)),
    "adagrad-start": (lambda: flow.optimizers.Adagrad(0.02, initial_accumulator_value=0.01, epsilon=1e-3),
                      lambda: keras.optimizers.Adagrad(0.02, initial_accumulator_value=0.01, epsilon=1e-3)),
    "adamax": (lambda: flow.optimizers.Adamax(0.02, beta_1=0.8), lambda: keras.optimizers.Adamax(0.02, beta_1=0.8)),
    "nadam": (lambda: flow.optimizers.Nadam(0.01), lambda: keras.optimizers.Nadam(0.01)),
    "adadelta": (lambda: flow.optimizers.Adadelta(1.0, rho=0.9, epsilon=1e-3), lambda: keras.optimizers.Adadelta(1.0, rho=0.9, epsilon=1e-3)),
    "lion": (lambda: flow.optimizers.Lion(0.003, weight_decay=0.1),
             lambda: keras.optimizers.Lion(0.003, weight_decay=0.1)),
    "ftrl": (lambda: flow.optimizers.Ftrl(0.05, l1_regularization_strength=0.001, l2_regularization_strength=0.01,
                                          l2_shrinkage_regularization_strength=0.02, beta=0.1),
             lambda: keras.optimizers.Ftrl(0.05, l1_regularization_strength=0.001, l2_regularization_strength=0.01,
                                           l2_shrinkage_regularization_strength=0.02, beta=0.1)),
    "ftrl-power": (lambda: flow.optimizers.Ftrl(0.05, learning_rate_power=-0.7),
                   lambda: keras.optimizers.Ftrl(0.05, learning_rate_power=-0.7)),
    "sgd-cosine-warmup": (
        lambda: flow.optimizers.SGD(S.CosineDecay(0.01, 4, warmup_target=0.2, warmup_steps=2), momentum=0.5),
        lambda: keras.optimizers.SGD(keras.optimizers.schedules.CosineDecay(0.01, 4, warmup_target=0.2,
                                                                             warmup_steps=2), momentum=0.5)),
}
RULES.update(MORE)      # the reference test's helpers find a rule by name there


@pytest.mark.parametrize("place", ["mirrored2", "consistent2"])
@pytest.mark.parametrize("rule", sorted(MORE))
def test_more_rules_train_to_keras_weights(rule, place):
    trains_to_keras_weights(rule, place)
