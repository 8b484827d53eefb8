"""What every backend's executables and kernel contexts answer alike."""
import numpy as np

from ..contract import Rows, read_all
from ..errors import ConfigError
from ..sbp import Split


class Executable:
    """What every backend's executables share: a Program bound to a runtime, with ``plan(batch)`` (consistent view:
    the front end's Plan for a fed batch size) and the global ``seed`` dropout draws with; and the answers of the
    optional members (``contract.Executable``) for a backend whose ``Capabilities`` do not claim them."""

    def __init__(self, runtime, program, plan, seed):
        self.runtime, self.program, self.plan, self.seed = runtime, program, plan, seed

    def updates_variables(self, step):
        """Whether step ``step`` applies the optimizer's rule (False: it only accumulates the gradient)."""
        return self.program.optimizer is None or self.program.optimizer.is_update_step(step)

    def steps(self, feeds, handles, lrs, first_step):
        return step_by_step(self, feeds, handles, lrs, first_step)

    def takes_rows(self, rows, sources):
        return False

    def compiled_text(self, feeds, handles, lr=0.0, step=1):
        raise ConfigError(f"step {self.program.name!r}: this backend does not show the program its engine compiles "
                          f"(its capabilities say shows_program=False); expected a backend that does (jax)")


class KernelContext:
    """What every backend's kernel context (``contract.KernelContext``) answers alike, outside the consistent view:
    the phase, no nd-SBP for any input, and layout hooks that leave tensors as they are.  A backend's context adds
    its engine's randomness and constants (``phase`` set there); its consistent view's overrides the hooks."""

    def training(self, flag):
        """Whether a kernel runs as in training: its layer's ``training`` argument ``flag``, else the step's phase."""
        return self.phase == "train" if flag is None else bool(flag)

    def input_sbp(self, node, i):
        """The nd-SBP input ``i`` of ``node`` reaches its kernel in (the kernel may take the form that signature
        needs), or None outside the consistent view."""
        return None

    def splits(self, node, i, dim):
        """Whether input ``i`` of ``node`` reaches its kernel split along ``dim`` over some devices."""
        nd = self.input_sbp(node, i)
        return nd is not None and Split(dim % node.inputs[i].ndim) in nd

    def lay_out(self, tensor, nd_sbp):
        """Hook for the consistent view: a kernel's own intermediate ``tensor`` laid out as ``nd_sbp``."""
        return tensor

    def pin(self, blob, tensor):
        """Hook for the consistent view: ``tensor`` put in ``blob``'s planned layout."""
        return tensor

    def box(self, node, i, tensor):
        """Hook for the consistent view: Boxing of input ``i`` of ``node`` to its signature's layout."""
        return tensor


def step_by_step(executable, feeds, handles, lrs, first_step):
    """Several steps as one call of ``executable`` per step (``Executable.steps``' meaning, for an executable
    without it, or one falling back): per input a ``Rows`` or an array stacked over the steps; returns per output
    the values of every step stacked."""
    stacked = [f.gather() if isinstance(f, Rows) else f for f in feeds]
    per_step = [executable([f[k] for f in stacked], handles, lr, first_step + k) for k, lr in enumerate(lrs)]
    return [np.stack(read_all(values)) for values in zip(*per_step)]
