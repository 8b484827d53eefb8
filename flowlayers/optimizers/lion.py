"""Lion (Keras 3's arithmetic): ``v -= lr * sign(beta_1 * m + (1 - beta_1) * g)``, then
``m = beta_2 * m + (1 - beta_2) * g``."""
from ..errors import ConfigError
from .base import Optimizer


class Lion(Optimizer):
    slot_names = ("momentum",)

    def __init__(self, learning_rate=0.001, beta_1=0.9, beta_2=0.99, **kwargs):
        super().__init__(learning_rate, **kwargs)
        if isinstance(beta_1, bool) or not isinstance(beta_1, (int, float)) or not 0 < beta_1 <= 1:
            raise ConfigError(f"Lion: beta_1 expected a number in (0, 1] (at 0 it degenerates to SignSGD, as Keras "
                              f"refuses), received {beta_1!r}")
        self.beta_1, self.beta_2 = float(beta_1), float(beta_2)

    def update(self, xp, var, grad, slots, lr, step):
        (m,) = slots
        xp.assign(var, var - lr * xp.sign(m * self.beta_1 + grad * (1.0 - self.beta_1)))
        xp.assign(m, m * self.beta_2 + grad * (1.0 - self.beta_2))

    def get_config(self):
        return {**super().get_config(), "beta_1": self.beta_1, "beta_2": self.beta_2}
