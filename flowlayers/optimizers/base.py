"""Optimizer base: learning rate (number, schedule or callable), step counter, slot variables."""
from ..errors import ConfigError


class Optimizer:
    #: slot names, each a variable shaped like the one it serves (initialised to zeros)
    slot_names = ()

    def __init__(self, learning_rate=0.001, weight_decay=None, clipnorm=None, name=None):
        if not callable(learning_rate) and not isinstance(learning_rate, (int, float)):
            raise ConfigError(f"{type(self).__name__}: learning_rate expected a number, a schedule or a callable "
                              f"step -> rate, received {learning_rate!r}")
        self.learning_rate = learning_rate
        self.weight_decay = weight_decay
        self.clipnorm = clipnorm
        self.name = name or type(self).__name__.lower()
        self.iterations = 0   # steps applied so far; the step counter saved in checkpoints

    def current_learning_rate(self):
        """The rate for the next step, from a float or a schedule called with the step."""
        lr = self.learning_rate
        return float(lr(self.iterations)) if callable(lr) else float(lr)

    def update(self, xp, var, grad, slots, lr, step):
        """Write the new value of ``var`` (and its ``slots``) with ``xp.assign``; ``step`` counts from 1."""
        raise NotImplementedError

    def get_config(self):
        return {"name": self.name, "learning_rate": self.learning_rate, "weight_decay": self.weight_decay}

    def __repr__(self):
        return f"{type(self).__name__}({', '.join(f'{k}={v!r}' for k, v in self.get_config().items())})"


def get(identifier):
    """An Optimizer from an instance or a Keras name ('sgd', 'adam', 'adamw', 'rmsprop')."""
    from . import rules

    if isinstance(identifier, Optimizer):
        return identifier
    names = {"sgd": rules.SGD, "adam": rules.Adam, "adamw": rules.AdamW, "rmsprop": rules.RMSprop}
    if isinstance(identifier, str) and identifier.lower() in names:
        return names[identifier.lower()]()
    raise ConfigError(f"optimizer: expected a flow.optimizers.* instance or one of {sorted(names)}, received "
                      f"{identifier!r}")
