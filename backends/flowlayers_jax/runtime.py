"""The jax backend's runtime: a ``jax.sharding.Mesh`` of devices, and variables as boxes holding sharded arrays.

The consistent view's mesh is the placement's (``data``, ``model``, ...); the mirrored view's is one ``replica``
axis, every variable whole on each device.  An array is immutable: a variable's handle is a ``Box`` whose array
each step replaces.
"""
import functools
import weakref

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import Mesh, NamedSharding, PartitionSpec

from flowlayers.sbp import Split

from . import devices
from .dtypes import jax_dtype


STAGE_BYTES = 1 << 30     # training arrays up to this size are kept on the devices


class Box:
    """A variable's engine handle: its current array, and the sharding it keeps."""
    __slots__ = ("value", "sharding")

    def __init__(self, value, sharding):
        self.value, self.sharding = value, sharding

    def __repr__(self):
        return f"<jax variable {self.value.shape} {self.value.dtype} {self.sharding.spec}>"


class Runtime:
    def __init__(self, view, n, mesh=None):
        self.view, self.num_replicas = view, n
        self.devices = devices.devices(n)
        self.platform = self.devices[0].platform
        # the consistent view on one device keeps its mesh's axis names (each of size 1)
        self.axes = list(mesh) if view == "consistent" and mesh else [("replica", n)]
        self.mesh = Mesh(np.array(self.devices).reshape([size for _, size in self.axes]),
                         [axis for axis, _ in self.axes])
        self._draws, self._staged, self._shardings = {}, {}, {}

    def __repr__(self):
        return f"<jax runtime view={self.view} mesh={dict(self.axes)}>"

    # Layouts ------------------------------------------------------------
    def spec(self, nd_sbp, rank):
        """nd-SBP -> PartitionSpec: a split dim names its axis (several axes: a tuple), broadcast and partial sum
        name none (a partial sum is left to XLA)."""
        dims = [[] for _ in range(rank)]
        for (axis, _), sbp in zip(self.axes, nd_sbp or ()):
            if isinstance(sbp, Split):
                dims[sbp.axis].append(axis)
        return PartitionSpec(*[None if not d else d[0] if len(d) == 1 else tuple(d) for d in dims])

    def sharding(self, nd_sbp, rank):
        key = (nd_sbp, rank)
        if key not in self._shardings:
            self._shardings[key] = NamedSharding(self.mesh, self.spec(nd_sbp, rank))
        return self._shardings[key]

    def replicated(self, rank=0):
        return self.sharding(None, rank)

    def place(self, value, nd_sbp):
        """A host array -> a sharded array: each device receives its block only."""
        value = np.asarray(value)
        return jax.device_put(value, self.sharding(nd_sbp, value.ndim))

    def stage(self, source):
        """A whole host array on every device (kept while the array lives: ``fit`` passes the same training arrays
        each step), so that steps gather their rows there; None where it is larger than ``STAGE_BYTES``."""
        if source.nbytes > STAGE_BYTES:
            return None
        key = id(source)
        if key not in self._staged or self._staged[key][0]() is not source:
            ref = weakref.ref(source, lambda _, key=key: self._staged.pop(key, None))
            self._staged[key] = (ref, jax.device_put(source, self.replicated(source.ndim)))
        return self._staged[key][1]

    # Variables ----------------------------------------------------------
    def create_variable(self, spec, value=None):
        """A Box for VariableSpec ``spec`` holding ``value`` (numpy) or drawn anew, sharded as its nd-SBP.  (A
        variable of a placement on some devices lives on the whole mesh; a step using it is refused.)"""
        sharding = self.sharding(spec.nd_sbp, len(spec.shape))
        if value is not None:
            return Box(jax.device_put(np.asarray(value, jax_dtype(spec.dtype)), sharding), sharding)
        key = (repr(spec.sampler), spec.shape, spec.dtype.name, sharding)
        if key not in self._draws:
            self._draws[key] = jax.jit(functools.partial(draw, spec.sampler, spec.shape, jax_dtype(spec.dtype)),
                                       out_shardings=sharding)
        return Box(self._draws[key](np.asarray(spec.seed, np.int64).astype(np.uint32)), sharding)

    def read(self, handle):
        return np.array(handle.value)

    def write(self, handle, value):
        handle.value = jax.device_put(np.asarray(value, handle.value.dtype), handle.sharding)

    def shard_shapes(self, handle):
        """The shape of the block each device holds, in the mesh's device order, read from the array."""
        shards = {s.device: s.data.shape for s in handle.value.addressable_shards}
        return [tuple(shards[d]) for d in self.devices if d in shards]

    def holders(self, handle):
        held = {s.device for s in handle.value.addressable_shards}
        return [i for i, d in enumerate(self.devices) if d in held]

    # Steps --------------------------------------------------------------
    def compile(self, program, plan, seed):
        if self.view == "consistent":
            from .consistent import ConsistentExecutable

            return ConsistentExecutable(self, program, plan, seed)
        from .mirrored import MirroredExecutable

        return MirroredExecutable(self, program, plan, seed)


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
