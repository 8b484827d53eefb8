"""OneFlow's job-function optimizers: ``flow.optimizer.SGD(scheduler, momentum=0).minimize(loss)``.

They wrap the Keras-style rules of ``flow.optimizers``; ``minimize`` records the
loss on the job function being built.  A non-scalar loss is minimised as its
mean over every element of the logical batch.
"""
import math

from . import job, optimizers
from .errors import ConfigError, GraphError
from .framework.blob import Blob


class PiecewiseConstantScheduler:
    """``values[i]`` while ``step < boundaries[i]``; ``values[-1]`` afterwards."""

    def __init__(self, boundaries, values):
        if len(values) != len(boundaries) + 1:
            raise ConfigError(f"PiecewiseConstantScheduler: expected len(values) == len(boundaries) + 1, received "
                              f"{len(boundaries)} boundaries and {len(values)} values")
        self.boundaries, self.values = list(boundaries), [float(v) for v in values]

    def __call__(self, step):
        for boundary, value in zip(self.boundaries, self.values):
            if step < boundary:
                return value
        return self.values[-1]


class CosineScheduler:
    """Cosine decay from ``base_lr`` to ``alpha * base_lr`` over ``steps``, then flat."""

    def __init__(self, base_lr, steps, alpha=0.0):
        self.base_lr, self.steps, self.alpha = float(base_lr), int(steps), float(alpha)

    def __call__(self, step):
        t = min(step, self.steps) / self.steps
        return self.base_lr * ((1 - self.alpha) * 0.5 * (1 + math.cos(math.pi * t)) + self.alpha)


def _rate(lr_scheduler):
    if isinstance(lr_scheduler, (int, float)) or callable(lr_scheduler):
        return lr_scheduler
    raise ConfigError(f"optimizer: expected a scheduler (e.g. flow.optimizer.PiecewiseConstantScheduler([], [0.1])) "
                      f"or a number, received {lr_scheduler!r}")


class _JobOptimizer:
    def minimize(self, loss):
        if not isinstance(loss, Blob):
            raise GraphError(f"{type(self).__name__}.minimize(loss): expected a Blob, received {type(loss).__name__}")
        if not loss.dtype.is_floating:
            raise GraphError(f"{type(self).__name__}.minimize(loss): expected a floating Blob, received {loss.dtype}")
        job.current_build().set_objective(loss, self.rule)


class SGD(_JobOptimizer):
    def __init__(self, lr_scheduler, momentum=0.0):
        self.rule = optimizers.SGD(_rate(lr_scheduler), momentum=momentum)


class Adam(_JobOptimizer):
    def __init__(self, lr_scheduler, beta1=0.9, beta2=0.999, epsilon=1e-8):
        self.rule = optimizers.Adam(_rate(lr_scheduler), beta_1=beta1, beta_2=beta2, epsilon=epsilon)


class AdamW(_JobOptimizer):
    def __init__(self, lr_scheduler, beta1=0.9, beta2=0.999, epsilon=1e-8, weight_decay=0.004):
        self.rule = optimizers.AdamW(_rate(lr_scheduler), weight_decay=weight_decay, beta_1=beta1, beta_2=beta2,
                                     epsilon=epsilon)
