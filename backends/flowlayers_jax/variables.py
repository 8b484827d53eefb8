"""Variables of the jax backend: a ``Box`` holding each one's current array, and their initial values drawn with
stateless random numbers: the same numbers for a variable path and seed in every view, device count and mesh.

Every variable drawn anew waits in its runtime's ``Draws`` until some variable's array is first read; then all
those waiting are drawn by one jitted program, compiled once per list of (initializer, shape, dtype, sharding).
XLA's cost per compile, not the size of a program, made most of a small model's first step when each initializer
and shape had a program of its own (bench/RESULTS_first_step.md).
"""
import functools
import math

import jax
import jax.numpy as jnp
import numpy as np
from jax.extend.random import threefry2x32_p

from .dtypes import jax_dtype


class Box:
    """A variable's engine handle: its current array, and the sharding it keeps (an array is immutable: each step
    puts a new one in).  A Box drawn anew has its array once its ``Draws`` ran, which reading ``value`` makes
    happen."""
    __slots__ = ("_value", "sharding", "_draws")

    def __init__(self, value, sharding, draws=None):
        self._value, self.sharding, self._draws = value, sharding, draws

    @property
    def value(self):
        if self._draws is not None:
            self._draws.run()
        return self._value

    @value.setter
    def value(self, value):
        self._value, self._draws = value, None

    def __repr__(self):
        value = self.value
        return f"<jax variable {value.shape} {value.dtype} {self.sharding.spec}>"


class Draws:
    """The initial values of one runtime's variables waiting to be drawn, all in one program when one is read."""

    def __init__(self, put_seeds):
        self._put_seeds = put_seeds     # host uint32 seeds -> an array every program can take (runtime.put_all)
        self._waiting, self._programs = [], {}

    def box(self, spec, sharding):
        """A Box whose array is VariableSpec ``spec``'s initial value, laid out as ``sharding``, once drawn."""
        box = Box(None, sharding, self)
        self._waiting.append((box, spec))
        return box

    def run(self):
        """Draw every waiting value (a Box written meanwhile keeps what it was given)."""
        waiting, self._waiting = [(b, s) for b, s in self._waiting if b._draws is self], []
        if not waiting:
            return
        groups = {}     # alike draws together, each group one vmapped draw: a program grows with kinds, not counts
        for box, spec in waiting:
            groups.setdefault((repr(spec.sampler), spec.shape, spec.dtype, box.sharding), []).append((box, spec))
        kinds = tuple((key, len(members)) for key, members in groups.items())
        if kinds not in self._programs:
            self._programs[kinds] = _program([(members[0][1], key[3], len(members)) for key, members in
                                              groups.items()])
        members = [m for ms in groups.values() for m in ms]
        seeds = self._put_seeds(np.asarray([spec.seed for _, spec in members], np.int64).astype(np.uint32))
        for (box, _), value in zip(members, self._programs[kinds](seeds)):
            box.value = value

    def programs(self):
        """How many draw programs were made (each compiled once)."""
        return len(self._programs)


def _program(groups):
    """One jitted program drawing ``groups`` (``(spec, sharding, count)``: ``count`` variables alike to ``spec``)
    from seeds stacked in group order: one output per variable, in its sharding.  The random bits of every
    float32 sample come from one threefry hash over all their elements (``_flat_bits``); the rest are drawn by
    group."""
    flat = [k for k, (spec, _, _) in enumerate(groups) if _flat(spec)]

    def drawn(seeds):
        starts = np.cumsum([0] + [count for _, _, count in groups])
        bits = _flat_bits(seeds, {k: (groups[k][0].shape, starts[k], groups[k][2]) for k in flat})
        out = []
        for k, (spec, _, count) in enumerate(groups):
            one = functools.partial(draw, spec.sampler, spec.shape, jax_dtype(spec.dtype))
            if k in bits and spec.sampler[0] == "uniform":
                stacked = _from_bits(spec.sampler, bits[k], jax_dtype(spec.dtype))
            elif k in bits:     # erf_inv's code (XLA:CPU at -O0) may differ with the shape it runs on: each alone
                out += [_from_bits(spec.sampler, bits[k][i], jax_dtype(spec.dtype)) for i in range(count)]
                continue
            elif count == 1:
                out.append(one(seeds[starts[k]]))
                continue
            else:
                stacked = jax.vmap(one)(seeds[starts[k]:starts[k] + count])
            out += [stacked[i] for i in range(count)]
        return tuple(out)

    return jax.jit(drawn, out_shardings=tuple(s for _, s, count in groups for _ in range(count)))


def _flat(spec):
    """Whether ``spec`` draws float32 numbers from threefry bits laid out by element index (JAX's partitionable
    threefry), so that its bits can be hashed with every other's (``_flat_bits``)."""
    kind, _ = spec.sampler
    return kind in ("uniform", "normal", "truncated_normal") and jax.config.jax_threefry_partitionable and \
        jax_dtype(spec.dtype) in (jnp.float32, jnp.float16, jnp.bfloat16)


def _flat_bits(seeds, groups):
    """``groups``: group index -> ``(shape, first seed, count)``.  Returns group index -> its ``(count, *shape)``
    random 32-bit words, as ``jax.random.bits(key, shape)`` gives each
    variable's (word ``i`` of a key ``(k1, k2)``: threefry2x32 of ``(k1, k2)`` and the counter ``(0, i)``, its two
    halves xor-ed), made by one hash over the elements of all: XLA compiles the hash, large when unrolled, once."""
    if not groups:
        return {}
    k1, k2, counters = [], [], []
    for shape, start, count in groups.values():
        n = math.prod(shape)
        words = seeds[start:start + count]
        k1.append(jnp.broadcast_to(words[:, :1], (count, n)).reshape(-1))
        k2.append(jnp.broadcast_to(words[:, 1:], (count, n)).reshape(-1))
        counters.append(jax.lax.broadcasted_iota(jnp.uint32, (count, n), 1).reshape(-1))
    counter = jnp.concatenate(counters)
    hi, lo = threefry2x32_p.bind(jnp.concatenate(k1), jnp.concatenate(k2), jnp.zeros_like(counter), counter)
    words, out, at = hi ^ lo, {}, 0
    for k, (shape, start, count) in groups.items():
        n = count * math.prod(shape)
        out[k] = words[at:at + n].reshape((count,) + tuple(shape))
        at += n
    return out


def _from_bits(sampler, bits, dtype):
    """``draw``'s values from its random words ``bits``: the operations of ``jax.random.uniform``, ``normal`` and
    ``truncated_normal`` in float32 (checked equal bit for bit by tests/test_jax_backend.py)."""
    kind, p = sampler
    f32 = jnp.float32
    unit = jax.lax.bitcast_convert_type(jax.lax.shift_right_logical(bits, jnp.uint32(32 - 23)) |
                                        jnp.uint32(0x3F800000), f32) - f32(1.0)

    def uniform(lo, hi):
        lo, hi = jnp.asarray(lo, f32), jnp.asarray(hi, f32)
        return jax.lax.max(lo, unit * (hi - lo) + lo)

    sqrt2 = np.array(np.sqrt(2), np.float32)
    if kind == "uniform":
        value = uniform(p["minval"], p["maxval"])
    elif kind == "normal":
        value = jax.lax.mul(sqrt2, jax.lax.erf_inv(uniform(np.nextafter(np.float32(-1), np.float32(0)), 1.0)))
        value = p["mean"] + p["stddev"] * value
    else:
        lower, upper = jnp.asarray(-2.0, f32), jnp.asarray(2.0, f32)
        value = sqrt2 * jax.lax.erf_inv(uniform(jax.lax.erf(lower / sqrt2), jax.lax.erf(upper / sqrt2)))
        value = jnp.clip(value, jax.lax.nextafter(lower, jnp.asarray(np.inf, f32)),
                         jax.lax.nextafter(upper, jnp.asarray(-np.inf, f32)))
        value = p["mean"] + p["stddev"] * value
    return value.astype(dtype)


def draw(sampler, shape, dtype, seed):
    """Values of ``sampler`` (an initializer's ``(kind, params)``) from a stateless key made of ``seed``'s two
    words: the same numbers whatever the sharding (JAX's threefry is partitionable)."""
    kind, p = sampler
    key = jax.random.wrap_key_data(seed, impl="threefry2x32")
    sample = jnp.float32 if dtype in (jnp.float16, jnp.bfloat16) else dtype
    if kind == "constant":
        value = jnp.full(shape, p["value"], sample)
    elif kind == "uniform" and jnp.issubdtype(sample, jnp.integer):
        value = jax.random.randint(key, shape, p["minval"], p["maxval"], sample)
    elif kind == "uniform":
        value = jax.random.uniform(key, shape, sample, p["minval"], p["maxval"])
    elif kind == "normal":
        value = p["mean"] + p["stddev"] * jax.random.normal(key, shape, sample)
    elif kind == "truncated_normal":    # within two standard deviations, as TensorFlow's
        value = p["mean"] + p["stddev"] * jax.random.truncated_normal(key, -2.0, 2.0, shape, sample)
    else:
        raise ValueError(f"unknown initializer sampler {kind!r}")
    return value.astype(dtype)
