"""Adadelta (Keras 3's arithmetic): ``a = rho * a + (1 - rho) * g²``,
``d = -sqrt(b + epsilon) * g / sqrt(a + epsilon)``, ``b = rho * b + (1 - rho) * d²``, ``v += lr * d``."""
from .base import Optimizer


class Adadelta(Optimizer):
    slot_names = ("accumulated_grad", "accumulated_delta_var")

    def __init__(self, learning_rate=0.001, rho=0.95, epsilon=1e-7, **kwargs):
        super().__init__(learning_rate, **kwargs)
        self.rho, self.epsilon = float(rho), float(epsilon)

    def update(self, xp, var, grad, slots, lr, step):
        a, b = slots
        a_new = self.rho * a + (1.0 - self.rho) * (grad * grad)
        xp.assign(a, a_new)
        delta = -(xp.sqrt(b + self.epsilon) * grad / xp.sqrt(a_new + self.epsilon))
        xp.assign(b, self.rho * b + (1.0 - self.rho) * (delta * delta))
        xp.assign(var, var + lr * delta)

    def get_config(self):
        return {**super().get_config(), "rho": self.rho, "epsilon": self.epsilon}
