"""The jax backend's runtime: a ``jax.sharding.Mesh`` of devices, and variables as boxes holding sharded arrays.

The consistent view's mesh is the placement's (``data``, ``model``, ...); the mirrored view's is one ``replica``
axis, every variable whole on each device.  An array is immutable: a variable's handle is a ``Box`` whose array
each step replaces.

Several processes (a Cluster): the mesh spans the devices of all of them (JAX's multi-controller mode).  A host
value handed in is the whole logical value in every process, and each process places only its own devices'
blocks (``put``); a value handed back is made whole in every process first (``whole``).
"""
import functools
import weakref

import jax
import numpy as np
from jax.sharding import Mesh, NamedSharding, PartitionSpec

from flowlayers.sbp import Split

from . import devices, host_heap
from .dtypes import jax_dtype
from .executable import in_flight, settle
from .variables import Box, Draws, draw


STAGE_BYTES = 1 << 30     # training arrays up to this size are kept on the devices


class Runtime:
    def __init__(self, view, n, mesh=None, cluster=None):
        self.view, self.num_replicas, self.cluster = view, n, cluster
        self.devices = devices.devices(n, cluster=cluster)
        self.platform = self.devices[0].platform
        if self.platform == "cpu":
            host_heap.keep()    # XLA:CPU's step buffers reused, not faulted in again each step
        # several CPU devices: a program with collectives runs only once the one before has ended (executable.py)
        self.waits = self.platform == "cpu" and n > 1
        # the consistent view on one device keeps its mesh's axis names (each of size 1)
        self.axes = list(mesh) if view == "consistent" and mesh else [("replica", n)]
        self.mesh = Mesh(np.array(self.devices).reshape([size for _, size in self.axes]),
                         [axis for axis, _ in self.axes])
        self._draws, self._staged, self._shardings, self._wholes = {}, {}, {}, {}
        self.waiting = Draws(lambda seeds: self.put_all(seeds, self.replicated(2)))    # variables to draw

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

    def placed_sharding(self, placement, rank):
        """Whole on each device of ``placement`` (device indices of a ``flow.scope.placement`` on some devices):
        a mesh of those devices, one axis."""
        key = ("placed", tuple(placement), rank)
        if key not in self._shardings:
            mesh = Mesh(np.array([self.devices[i] for i in placement]), ["placed"])
            self._shardings[key] = NamedSharding(mesh, PartitionSpec())
        return self._shardings[key]

    def place(self, value, nd_sbp):
        """A host array -> a sharded array: each device receives its block only."""
        value = np.asarray(value)
        return self.put(value, self.sharding(nd_sbp, value.ndim))

    def put(self, value, sharding):
        """The whole logical host ``value`` (the same in every process) as an array of ``sharding``: each process
        places the blocks of its own devices only."""
        if self.cluster is None:
            return jax.device_put(value, sharding)
        value = np.asarray(value)
        return jax.make_array_from_callback(value.shape, sharding, lambda index: np.asarray(value[index]))

    def put_all(self, values, shardings):
        """Host arrays in (nested) lists -> arrays of the shardings in the same places (a single sharding: for a
        whole list); device arrays and None as they are.  Several processes only: jit takes host arrays as they
        are where every device is this process's."""
        if self.cluster is None or values is None or isinstance(values, jax.Array):
            return values
        if isinstance(values, (list, tuple)):
            many = isinstance(shardings, (list, tuple))
            return type(values)(self.put_all(v, shardings[i] if many else shardings) for i, v in enumerate(values))
        return self.put(values, shardings)

    def whole(self, values):
        """``values`` (a list) with each array spread over other processes' devices replicated, so that the host
        reads it whole in every process; the others as they are.  One dispatch for all, a collective: every
        process replicates the same values in the same order (they make the same calls)."""
        far = [i for i, v in enumerate(values) if isinstance(v, jax.Array)
               and not (v.is_fully_addressable or v.is_fully_replicated)]
        if not far:
            return values
        if len(far) not in self._wholes:
            self._wholes[len(far)] = jax.jit(lambda *xs: xs, out_shardings=(self.replicated(),) * len(far))
        settle()
        whole = self._wholes[len(far)](*[values[i] for i in far])
        if self.waits:
            in_flight(whole)
        values = list(values)
        for i, v in zip(far, whole):
            values[i] = v
        return values

    def gather(self, array):
        """Every process's host ``array`` (the same shape in each) joined along dim 0 in process order, in every
        process (the front end joins per-process shares of a batch so)."""
        array = np.asarray(array)
        if self.cluster is None:
            return array
        from jax.experimental import multihost_utils

        settle()    # a program with collectives
        return np.asarray(multihost_utils.process_allgather(array, tiled=True))

    def barrier(self, name):
        """Return once every process reached ``barrier(name)`` (at once without a cluster)."""
        if self.cluster is None:
            return
        from jax.experimental import multihost_utils

        settle()    # its all-gather is a program with collectives
        multihost_utils.sync_global_devices(name)

    def stages(self, source):
        """Whether ``stage`` keeps ``source`` on the devices."""
        return source.nbytes <= STAGE_BYTES

    def stage(self, source):
        """A whole host array on every device (kept while the array lives: ``fit`` passes the same training arrays
        each step), so that steps gather their rows there; None where it is larger than ``STAGE_BYTES``."""
        if not self.stages(source):
            return None
        key = id(source)
        if key not in self._staged or self._staged[key][0]() is not source:
            ref = weakref.ref(source, lambda _, key=key: self._staged.pop(key, None))
            self._staged[key] = (ref, self.put(source, self.replicated(source.ndim)))
        return self._staged[key][1]

    # Variables ----------------------------------------------------------
    def create_variable(self, spec, value=None):
        """A Box for VariableSpec ``spec`` holding ``value`` (numpy) or drawn anew, sharded as its nd-SBP, or
        whole on each device of its placement on some devices.  A value drawn anew waits to be drawn with every
        other waiting (``Draws``), except on some devices, whose mesh is another: drawn here alone."""
        if spec.devices is not None and self.view == "consistent":
            sharding = self.placed_sharding(spec.devices, len(spec.shape))
        else:
            sharding = self.sharding(spec.nd_sbp, len(spec.shape))
        if value is not None:
            return Box(self.put(np.asarray(value, jax_dtype(spec.dtype)), sharding), sharding)
        if spec.devices is None or self.view != "consistent":
            return self.waiting.box(spec, sharding)
        key = (repr(spec.sampler), spec.shape, spec.dtype.name, sharding)
        if key not in self._draws:
            self._draws[key] = jax.jit(functools.partial(draw, spec.sampler, spec.shape, jax_dtype(spec.dtype)),
                                       out_shardings=sharding)
        seed = self.put_all(np.asarray(spec.seed, np.int64).astype(np.uint32), self.replicated(1))
        return Box(self._draws[key](seed), sharding)

    def read(self, handle):
        return np.array(self.whole([handle.value])[0])

    def write(self, handle, value):
        handle.value = self.put(np.asarray(value, handle.value.dtype), handle.sharding)

    def shard_shapes(self, handle):
        """The shape of the block each device holds, in the mesh's device order, read from the array's sharding
        (all devices, also those of other processes)."""
        shape = handle.value.shape
        blocks = handle.value.sharding.devices_indices_map(shape)
        return [tuple(len(range(*s.indices(size))) for s, size in zip(blocks[d], shape))
                for d in self.devices if d in blocks]

    def holders(self, handle):
        held = handle.value.sharding.device_set
        return [i for i, d in enumerate(self.devices) if d in held]

    # Steps --------------------------------------------------------------
    def compile(self, program, plan, seed):
        if self.view == "consistent" and any(n.placement is not None for n in program.nodes):
            from .placed import PlacedExecutable     # a step per stage of placements

            return PlacedExecutable(self, program, plan, seed)
        if self.view == "consistent":
            from .consistent import ConsistentExecutable

            return ConsistentExecutable(self, program, plan, seed)
        from .mirrored import MirroredExecutable

        return MirroredExecutable(self, program, plan, seed)

