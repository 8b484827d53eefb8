"""Nadam (Keras 3's arithmetic): Adam with Nesterov momentum and the momentum schedule
``u_t = beta_1 * (1 - 0.5 * 0.96^t)``, whose running product ``u_product`` is the optimizer's own state (a scalar
checkpointed with the slots):

    u_product *= u_t;  m += (g - m)(1 - beta_1);  v += (g² - v)(1 - beta_2)
    m_hat = u_{t+1} m / (1 - u_product u_{t+1}) + (1 - u_t) g / (1 - u_product);  v_hat = v / (1 - beta_2^t)
    var -= lr * m_hat / (sqrt(v_hat) + epsilon)
"""
from ..errors import ConfigError
from ..initializers import Constant
from .base import Optimizer
from .loss_scale import _ScalarState

DECAY = 0.96     # Keras' momentum schedule base


class Nadam(Optimizer):
    slot_names = ("momentum", "velocity")

    def __init__(self, learning_rate=0.001, beta_1=0.9, beta_2=0.999, epsilon=1e-7, **kwargs):
        super().__init__(learning_rate, **kwargs)
        if self.gradient_accumulation_steps:
            raise ConfigError(f"Nadam: gradient_accumulation_steps={self.gradient_accumulation_steps} is not "
                              f"supported (its momentum schedule is state advanced every step); expected None")
        self.beta_1, self.beta_2, self.epsilon = float(beta_1), float(beta_2), float(epsilon)
        self._state, self._u_product = None, None

    def state_variables(self):
        """``u_product``: the running product of the momentum schedule, a scalar float32 starting at 1."""
        if self._state is None:
            self._state = {"u_product": _ScalarState(f"{self.name}/u_product", Constant(1.0))}
        return dict(self._state)

    def apply_all(self, xp, variables, refs, grads, slots, lr, step, update=True, norms=None, state=(),
                  finite=None):
        (u_product,) = state
        xp.assign(u_product, u_product * self.beta_1 * (1.0 - 0.5 * DECAY ** step))
        self._u_product = u_product       # read by ``update`` during this call only
        try:
            super().apply_all(xp, variables, refs, grads, slots, lr, step, update, norms)
        finally:
            self._u_product = None

    def update(self, xp, var, grad, slots, lr, step):
        m, v = slots
        u_t = self.beta_1 * (1.0 - 0.5 * DECAY ** step)
        u_next = self.beta_1 * (1.0 - 0.5 * DECAY ** (step + 1.0))
        u_product = self._u_product * 1.0
        m_new = m + (grad - m) * (1.0 - self.beta_1)
        v_new = v + (grad * grad - v) * (1.0 - self.beta_2)
        xp.assign(m, m_new)
        xp.assign(v, v_new)
        m_hat = u_next * m_new / (1.0 - u_product * u_next) + (1.0 - u_t) * grad / (1.0 - u_product)
        v_hat = v_new / (1.0 - self.beta_2 ** step)
        xp.assign(var, var - m_hat * lr / (xp.sqrt(v_hat) + self.epsilon))

    def get_config(self):
        return {**super().get_config(), "beta_1": self.beta_1, "beta_2": self.beta_2, "epsilon": self.epsilon}
