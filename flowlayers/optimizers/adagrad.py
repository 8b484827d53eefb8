"""Adagrad (Keras 3's arithmetic): ``acc += g²; v -= lr * g / sqrt(acc + epsilon)``, the accumulator starting at
``initial_accumulator_value``."""
from ..errors import ConfigError
from .base import Optimizer


class Adagrad(Optimizer):
    slot_names = ("accumulator",)

    def __init__(self, learning_rate=0.001, initial_accumulator_value=0.1, epsilon=1e-7, **kwargs):
        super().__init__(learning_rate, **kwargs)
        if isinstance(initial_accumulator_value, bool) or not isinstance(initial_accumulator_value, (int, float)) \
                or initial_accumulator_value < 0:
            raise ConfigError(f"Adagrad: initial_accumulator_value expected a number >= 0, received "
                              f"{initial_accumulator_value!r}")
        self.initial_accumulator_value, self.epsilon = float(initial_accumulator_value), float(epsilon)
        self.slot_initial_values = {"accumulator": self.initial_accumulator_value}

    def update(self, xp, var, grad, slots, lr, step):
        (acc,) = slots
        acc_new = acc + grad * grad
        xp.assign(acc, acc_new)
        xp.assign(var, var - lr * grad / xp.sqrt(acc_new + self.epsilon))

    def get_config(self):
        return {**super().get_config(), "initial_accumulator_value": self.initial_accumulator_value,
                "epsilon": self.epsilon}
