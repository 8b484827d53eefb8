"""Update rules (Keras 3's arithmetic).  ``xp.assign(v, value)`` writes; ``xp.sqrt`` is the only math.

A namespace may also offer its engine's kernel for a whole rule, the same arithmetic as one op per variable
(``xp.apply_sgd``, ``xp.apply_adam``; see ``Optimizer.update``); a rule takes it when offered.
"""
from ..errors import ConfigError
from .base import Optimizer


class SGD(Optimizer):
    """``m = momentum * m - lr * g; v += m`` (nesterov: ``v += momentum * m - lr * g``)."""

    def __init__(self, learning_rate=0.01, momentum=0.0, nesterov=False, **kwargs):
        super().__init__(learning_rate, **kwargs)
        if not 0.0 <= momentum <= 1.0:
            raise ConfigError(f"SGD: momentum expected a float in [0, 1], received {momentum!r}")
        self.momentum, self.nesterov = float(momentum), nesterov
        self.slot_names = ("momentum",) if momentum else ()

    def update(self, xp, var, grad, slots, lr, step):
        if hasattr(xp, "apply_sgd"):
            xp.apply_sgd(var, grad, slots[0] if slots else None, lr, self.momentum, self.nesterov)
            return
        if not self.momentum:
            xp.assign(var, var - lr * grad)
            return
        (m,) = slots
        m_new = self.momentum * m - lr * grad
        xp.assign(m, m_new)
        xp.assign(var, var + (self.momentum * m_new - lr * grad if self.nesterov else m_new))

    def get_config(self):
        return {**super().get_config(), "momentum": self.momentum, "nesterov": self.nesterov}


class Adam(Optimizer):
    slot_names = ("m", "v")

    def __init__(self, learning_rate=0.001, beta_1=0.9, beta_2=0.999, epsilon=1e-7, **kwargs):
        super().__init__(learning_rate, **kwargs)
        self.beta_1, self.beta_2, self.epsilon = float(beta_1), float(beta_2), float(epsilon)

    def update(self, xp, var, grad, slots, lr, step):
        m, v = slots
        if hasattr(xp, "apply_adam"):
            decayed = self.decayed(var, lr)
            if decayed is not var:
                xp.assign(var, decayed)
            xp.apply_adam(var, m, v, grad, lr, step, self.beta_1, self.beta_2, self.epsilon)
            return
        lr_t = lr * (1.0 - self.beta_2 ** step) ** 0.5 / (1.0 - self.beta_1 ** step)
        m_new = m + (grad - m) * (1.0 - self.beta_1)
        v_new = v + (grad * grad - v) * (1.0 - self.beta_2)
        xp.assign(m, m_new)
        xp.assign(v, v_new)
        xp.assign(var, self.decayed(var, lr) - lr_t * m_new / (xp.sqrt(v_new) + self.epsilon))

    def decayed(self, var, lr):
        return var

    def get_config(self):
        return {**super().get_config(), "beta_1": self.beta_1, "beta_2": self.beta_2, "epsilon": self.epsilon}


class AdamW(Adam):
    """Adam with decoupled weight decay: ``v -= v * weight_decay * lr`` before the Adam step."""

    def __init__(self, learning_rate=0.001, weight_decay=0.004, **kwargs):
        super().__init__(learning_rate, weight_decay=weight_decay, **kwargs)

    def decayed(self, var, lr):
        return var - var * (self.weight_decay * lr)


class RMSprop(Optimizer):
    slot_names = ("velocity",)

    def __init__(self, learning_rate=0.001, rho=0.9, epsilon=1e-7, **kwargs):
        super().__init__(learning_rate, **kwargs)
        self.rho, self.epsilon = float(rho), float(epsilon)

    def update(self, xp, var, grad, slots, lr, step):
        (s,) = slots
        s_new = self.rho * s + (1.0 - self.rho) * grad * grad
        xp.assign(s, s_new)
        xp.assign(var, var - lr * grad / (xp.sqrt(s_new) + self.epsilon))
