"""FTRL-proximal (Keras 3's arithmetic), with ``p = -learning_rate_power`` and ``l2 = l2_regularization_strength
+ beta / (2 lr)``:

    n' = n + g²;  z += g + 2 * l2_shrinkage * v - (n'^p - n^p) / lr * v;  n = n'
    v = (clip(z, -l1, l1) - z) / (n'^p / lr + 2 * l2)

the accumulator ``n`` starting at ``initial_accumulator_value``, the linear term ``z`` at zero.
"""
from ..errors import ConfigError
from .base import Optimizer


class Ftrl(Optimizer):
    slot_names = ("accumulator", "linear")

    def __init__(self, learning_rate=0.001, learning_rate_power=-0.5, initial_accumulator_value=0.1,
                 l1_regularization_strength=0.0, l2_regularization_strength=0.0,
                 l2_shrinkage_regularization_strength=0.0, beta=0.0, **kwargs):
        super().__init__(learning_rate, **kwargs)
        for what, value, sign in (("initial_accumulator_value", initial_accumulator_value, 1),
                                  ("learning_rate_power", learning_rate_power, -1),
                                  ("l1_regularization_strength", l1_regularization_strength, 1),
                                  ("l2_regularization_strength", l2_regularization_strength, 1),
                                  ("l2_shrinkage_regularization_strength", l2_shrinkage_regularization_strength, 1),
                                  ("beta", beta, 0)):
            if isinstance(value, bool) or not isinstance(value, (int, float)) or value * sign < 0:
                bound = {1: "a number >= 0", -1: "a number <= 0", 0: "a number"}[sign]
                raise ConfigError(f"Ftrl: {what} expected {bound}, received {value!r}")
        self.learning_rate_power = float(learning_rate_power)
        self.initial_accumulator_value = float(initial_accumulator_value)
        self.l1_regularization_strength = float(l1_regularization_strength)
        self.l2_regularization_strength = float(l2_regularization_strength)
        self.l2_shrinkage_regularization_strength = float(l2_shrinkage_regularization_strength)
        self.beta = float(beta)
        self.slot_initial_values = {"accumulator": self.initial_accumulator_value}

    def update(self, xp, var, grad, slots, lr, step):
        n, z = slots
        p, l1 = -self.learning_rate_power, self.l1_regularization_strength
        l2 = self.l2_regularization_strength + self.beta / (2.0 * lr)
        n_new = n + grad * grad
        n_new_p = xp.pow(n_new, p)
        z_new = z + (grad + 2.0 * self.l2_shrinkage_regularization_strength * var
                     - (n_new_p - xp.pow(n, p)) / lr * var)
        xp.assign(z, z_new)
        xp.assign(var, (xp.clip(z_new, -l1, l1) - z_new) / (n_new_p / lr + 2.0 * l2))
        xp.assign(n, n_new)

    def get_config(self):
        return {**super().get_config(), "learning_rate_power": self.learning_rate_power,
                "initial_accumulator_value": self.initial_accumulator_value,
                "l1_regularization_strength": self.l1_regularization_strength,
                "l2_regularization_strength": self.l2_regularization_strength,
                "l2_shrinkage_regularization_strength": self.l2_shrinkage_regularization_strength,
                "beta": self.beta}
