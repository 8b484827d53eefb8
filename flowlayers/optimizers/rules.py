"""Update rules (Keras 3's arithmetic).  ``xp.assign(v, value)`` writes; the math is ``xp.sqrt``, ``xp.abs``,
``xp.sign``, ``xp.pow``, ``xp.minimum``, ``xp.maximum`` and ``xp.clip`` (``contract.ArrayNamespace``).

Before a rule, ``Optimizer.apply_gradient`` clips the gradient and applies Keras 3's decoupled weight decay when
``weight_decay`` is set: ``v -= v * weight_decay * lr`` (``Optimizer.decay``).

A namespace may also offer its engine's kernel for a whole rule, the same arithmetic as one op per variable
(``xp.apply_sgd``, ``xp.apply_adam``, named in ``xp.whole_rules``; see ``Optimizer.update``); a rule takes it when
offered.
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
        if "sgd" in xp.whole_rules:
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
        if "adam" in xp.whole_rules:
            xp.apply_adam(var, m, v, grad, lr, step, self.beta_1, self.beta_2, self.epsilon)
            return
        lr_t = lr * (1.0 - self.beta_2 ** step) ** 0.5 / (1.0 - self.beta_1 ** step)
        m_new = m + (grad - m) * (1.0 - self.beta_1)
        v_new = v + (grad * grad - v) * (1.0 - self.beta_2)
        xp.assign(m, m_new)
        xp.assign(v, v_new)
        xp.assign(var, var - lr_t * m_new / (xp.sqrt(v_new) + self.epsilon))

    def get_config(self):
        return {**super().get_config(), "beta_1": self.beta_1, "beta_2": self.beta_2, "epsilon": self.epsilon}


class AdamW(Adam):
    """Adam with decoupled weight decay on by default: ``v -= v * weight_decay * lr`` before the Adam step."""

    def __init__(self, learning_rate=0.001, weight_decay=0.004, **kwargs):
        super().__init__(learning_rate, weight_decay=weight_decay, **kwargs)


class RMSprop(Optimizer):
    """``s = rho * s + (1 - rho) * g²`` (centered: minus the square of ``a = rho * a + (1 - rho) * g``);
    ``inc = lr * g / sqrt(s + epsilon)``; ``v -= inc``, or with momentum ``m = momentum * m + inc; v -= m``."""

    def __init__(self, learning_rate=0.001, rho=0.9, momentum=0.0, epsilon=1e-7, centered=False, **kwargs):
        super().__init__(learning_rate, **kwargs)
        if not 0.0 <= momentum <= 1.0:
            raise ConfigError(f"RMSprop: momentum expected a float in [0, 1], received {momentum!r}; pass 0.0 for "
                              f"none, or a fraction such as 0.9")
        self.rho, self.momentum, self.epsilon, self.centered = float(rho), float(momentum), float(epsilon), centered
        self.slot_names = ("velocity",) + (("momentum",) if momentum else ()) + (("average_gradient",) if centered
                                                                               else ())

    def update(self, xp, var, grad, slots, lr, step):
        slots = dict(zip(self.slot_names, slots))
        s = slots["velocity"]
        s_new = self.rho * s + (1.0 - self.rho) * (grad * grad)
        xp.assign(s, s_new)
        denominator = s_new + self.epsilon
        if self.centered:
            a = slots["average_gradient"]
            a_new = self.rho * a + (1.0 - self.rho) * grad
            xp.assign(a, a_new)
            denominator = s_new - a_new * a_new + self.epsilon
        increment = lr * grad / xp.sqrt(denominator)
        if self.momentum:
            m = slots["momentum"]
            increment = self.momentum * m + increment
            xp.assign(m, increment)
        xp.assign(var, var - increment)

    def get_config(self):
        return {**super().get_config(), "rho": self.rho, "momentum": self.momentum, "epsilon": self.epsilon,
                "centered": self.centered}
