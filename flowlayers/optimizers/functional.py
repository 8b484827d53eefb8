"""Optimizer rules for engines without in-place update: each variable and slot goes into the rule as a ``Ref``,
a reference whose arithmetic reads its current value, ``assign`` replaces that value, and the step returns the
final ones.  With numpy it is also a float64 reference of every rule, with no engine at all.

    xp = FunctionalMath(numpy)       # or jax.numpy, inside a traced step
    values, slots = functional.step(optimizer, xp, variables, values, grads, slots, lr, step)
"""


class Ref:
    """A variable or slot inside a functional update: reading it reads ``value``; ``FunctionalMath.assign``
    replaces ``value`` (later reads see the new one, as they would on an engine that writes in place)."""
    __slots__ = ("value",)
    __array_ufunc__ = None          # numpy hands ``array - ref`` to Ref.__rsub__ instead of looping over objects

    def __init__(self, value):
        self.value = value

    def __add__(self, other):
        return self.value + _read(other)

    def __radd__(self, other):
        return _read(other) + self.value

    def __sub__(self, other):
        return self.value - _read(other)

    def __rsub__(self, other):
        return _read(other) - self.value

    def __mul__(self, other):
        return self.value * _read(other)

    def __rmul__(self, other):
        return _read(other) * self.value

    def __truediv__(self, other):
        return self.value / _read(other)

    def __rtruediv__(self, other):
        return _read(other) / self.value

    def __neg__(self):
        return -self.value


def _read(x):
    return x.value if isinstance(x, Ref) else x


class FunctionalMath:
    """The array namespace of ``Optimizer.apply_gradient`` over an array module (numpy, jax.numpy): new arrays
    only, no array written in place."""
    whole_rules = frozenset()     # no whole-rule kernels: every rule is written out

    def __init__(self, module):
        self.module = module

    def sqrt(self, x):
        return self.module.sqrt(_read(x))

    def minimum(self, a, b):
        return self.module.minimum(_read(a), _read(b))

    def maximum(self, a, b):
        return self.module.maximum(_read(a), _read(b))

    def abs(self, x):
        return self.module.abs(_read(x))

    def sign(self, x):
        return self.module.sign(_read(x))

    def pow(self, x, exponent):
        return self.module.power(_read(x), exponent)

    def clip(self, x, lo, hi):
        return self.module.clip(_read(x), lo, hi)

    def where(self, flag, a, b):
        return self.module.where(flag, _read(a), _read(b))

    def greater_equal(self, a, b):
        return self.module.greater_equal(_read(a), _read(b))

    def all_finite(self, values):
        """Whether every element of every one of ``values`` is finite (one boolean scalar)."""
        flags = [self.module.all(self.module.isfinite(_read(v))) for v in values]
        return self.module.all(self.module.stack(flags)) if flags else self.module.asarray(True)

    def when(self, flag, update, refs):
        """``update()`` (which assigns ``refs``) taking effect only where ``flag`` holds: each of ``refs`` keeps
        its value otherwise."""
        before = [r.value for r in refs]
        update()
        for ref, old in zip(refs, before):
            ref.value = self.module.where(flag, ref.value, old)

    def assign(self, ref, value):
        ref.value = self.module.asarray(_read(value), dtype=ref.value.dtype)


def step(optimizer, xp, variables, values, grads, slots, lr, step, update=None):
    """One step of ``optimizer`` on ``values`` (one array per Variable of ``variables``, which decide weight decay)
    with ``grads``, ``slots`` (per variable, its slot arrays in ``optimizer.all_slot_names`` order), the rate
    ``lr`` and ``step`` (from 1; with ``gradient_accumulation_steps`` K, every K-th applies the rule, the others
    only accumulate; ``update`` says which where ``step`` is traced).  Returns (new values, new slots); nothing
    passed in is changed."""
    return stateful_step(optimizer, xp, variables, values, grads, slots, lr, step, update)[:2]


def stateful_step(optimizer, xp, variables, values, grads, slots, lr, step, update=None, state=()):
    """``step`` of an optimizer with its own ``state`` (arrays in ``state_variables`` order: a
    LossScaleOptimizer's scale and counters).  Returns (new values, new slots, new state)."""
    update = optimizer.is_update_step(step) if update is None else update
    refs = [Ref(v) for v in values]
    slot_refs = [[Ref(s) for s in per_var] for per_var in slots]
    state_refs = [Ref(s) for s in state]
    norms = None
    if optimizer.clips_by_norm:
        norms = optimizer.clipping_norms(xp, [xp.module.sum(g * g) for g in grads])
    optimizer.apply_all(xp, variables, refs, grads, slot_refs, lr, step, update, norms, state_refs)
    return [r.value for r in refs], [[s.value for s in per_var] for per_var in slot_refs], [s.value for s in
                                                                                           state_refs]
