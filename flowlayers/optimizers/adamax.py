"""Adamax (Keras 3's arithmetic): Adam with the infinity norm, ``m += (g - m)(1 - beta_1)``,
``u = max(beta_2 * u, |g|)``, ``v -= lr * m / ((1 - beta_1^t)(u + epsilon))``."""
from .base import Optimizer


class Adamax(Optimizer):
    slot_names = ("momentum", "norm")

    def __init__(self, learning_rate=0.001, beta_1=0.9, beta_2=0.999, epsilon=1e-7, **kwargs):
        super().__init__(learning_rate, **kwargs)
        self.beta_1, self.beta_2, self.epsilon = float(beta_1), float(beta_2), float(epsilon)

    def update(self, xp, var, grad, slots, lr, step):
        m, u = slots
        m_new = m + (grad - m) * (1.0 - self.beta_1)
        u_new = xp.maximum(self.beta_2 * u, xp.abs(grad))
        xp.assign(m, m_new)
        xp.assign(u, u_new)
        xp.assign(var, var - lr * m_new / ((1.0 - self.beta_1 ** step) * (u_new + self.epsilon)))

    def get_config(self):
        return {**super().get_config(), "beta_1": self.beta_1, "beta_2": self.beta_2, "epsilon": self.epsilon}
