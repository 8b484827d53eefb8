"""Dtype policies, Keras 3's names and meaning: what a layer computes in and what its variables are kept in.

    flow.mixed_precision.set_global_policy("mixed_bfloat16")
    x = flow.layers.Dense(256, activation="relu")(inputs)       # computes in bfloat16, kernel kept in float32
    y = flow.layers.Dense(10, dtype="float32")(x)               # a float32 head: returns float32

A policy named after a dtype (``"float32"``, ``"bfloat16"``) computes and keeps variables in that dtype;
``"mixed_float16"`` and ``"mixed_bfloat16"`` compute in the half dtype and keep variables in float32.  A layer takes
the policy in force when it is made (``dtype=None``), or the one its ``dtype=`` names.  Float inputs are cast to the
compute dtype on entry and float variables are read in it, as Keras casts them; the loss, metrics and optimizer
state stay float32.  Under ``"mixed_float16"``, ``compile`` wraps the optimizer in a ``LossScaleOptimizer``.
"""
import contextlib

from . import dtypes, settings
from .errors import DTypeError
from .optimizers.loss_scale import LossScaleOptimizer

__all__ = ["DTypePolicy", "Policy", "set_global_policy", "global_policy", "set_dtype_policy", "dtype_policy",
           "LossScaleOptimizer"]

MIXED = {"mixed_float16": "float16", "mixed_bfloat16": "bfloat16"}


class DTypePolicy:
    """Keras' ``DTypePolicy(name=None)``: ``name`` a dtype name or ``"mixed_float16"``/``"mixed_bfloat16"``;
    None takes the global policy.  ``compute_dtype`` and ``variable_dtype`` are dtype names, as in Keras."""

    def __init__(self, name=None):
        if name is None:
            name = global_policy().name
        if not isinstance(name, str):
            raise DTypeError(f"DTypePolicy(name): expected a policy name such as 'mixed_bfloat16' or 'float32', "
                             f"received {name!r} (of type {type(name).__name__})")
        if name in MIXED:
            compute, variable = MIXED[name], "float32"
        elif name in dtypes.ALL:
            compute = variable = name
        else:
            raise DTypeError(f"DTypePolicy: expected one of {sorted(MIXED)} or a dtype name among "
                             f"{sorted(dtypes.ALL)}, received {name!r}")
        self._name, self._compute_dtype, self._variable_dtype = name, compute, variable

    @property
    def name(self):
        return self._name

    @property
    def compute_dtype(self):
        """The dtype a layer computes in, and returns its outputs in."""
        return self._compute_dtype

    @property
    def variable_dtype(self):
        """The dtype a layer's variables are made and kept in (what checkpoints hold)."""
        return self._variable_dtype

    @property
    def quantization_mode(self):
        """Keras' quantization mode: always None (no quantized policy here)."""
        return None

    def get_config(self):
        return {"name": self._name}

    @classmethod
    def from_config(cls, config):
        return cls(**config)

    def __eq__(self, other):
        return isinstance(other, DTypePolicy) and other.name == self.name

    def __hash__(self):
        return hash(self._name)

    def __repr__(self):
        return f'<DTypePolicy "{self._name}">'


Policy = DTypePolicy    # Keras' legacy name


def get(value, what="dtype"):
    """A policy from a policy, its name, a dtype (``flow.bfloat16``, a numpy dtype) or None (the policy in force);
    anything else is a DTypeError naming ``what``."""
    if isinstance(value, DTypePolicy):
        return value
    if value is None:
        return policy_in_force()
    if isinstance(value, str) and value in MIXED:
        return DTypePolicy(value)
    try:
        return DTypePolicy(dtypes.as_dtype(value, what).name)
    except DTypeError:
        raise DTypeError(f"{what}: expected a dtype policy, one of {sorted(MIXED)} or a dtype among "
                         f"{sorted(dtypes.ALL)}, received {value!r}") from None


def set_global_policy(policy):
    """The policy of every layer made afterwards without a ``dtype=`` (Keras' ``set_global_policy``); None goes
    back to the default (the float dtype in force: float32)."""
    settings.set_dtype_policy(None if policy is None else get(policy, "set_global_policy(policy)"))


set_dtype_policy = set_global_policy    # Keras 3's newer name


def global_policy():
    """The global policy: the one set, else the float dtype in force (``float32``)."""
    return settings.dtype_policy() or DTypePolicy(dtypes.floatx().name)


dtype_policy = global_policy


def policy_in_force():
    """What a layer made now without a ``dtype=`` takes: a job function's (``enable_auto_mixed_precision``) while
    it builds, else the global policy."""
    return settings.scoped_dtype_policy() or global_policy()


@contextlib.contextmanager
def policy_scope(policy):
    """Layers made inside take ``policy`` (a job function's build)."""
    settings.push_dtype_policy(get(policy, "policy_scope(policy)"))
    try:
        yield
    finally:
        settings.pop_dtype_policy()


def half(dtype):
    """Whether ``dtype`` is a 16-bit float, which the loss and metrics take in float32, as Keras does."""
    return dtype in (dtypes.float16, dtypes.bfloat16)
