"""Runtimes: the values of variables on a view's devices, the collectives a host asks of them, and the steps
compiled for them.

The consistent view on several devices is a DTensor mesh (``ConsistentRuntime``): a variable is a DVariable laid
out as its VariableSpec says.  The mirrored view, and any view on one device, is a ``tf.distribute`` strategy
(``StrategyRuntime``): one copy of each variable per device (plain variables on one device).  Several processes
join TF's distributed runtime for the view first (``devices.join``): DTensor multi-client, or a
MultiWorkerMirroredStrategy with one replica per device of every process; each process holds its devices' values
only, and every value handed in or back is the whole logical one.
"""
import functools
import itertools

import numpy as np
import tensorflow as tf
from tensorflow.experimental import dtensor
from tensorflow.python.ops.resource_variable_ops import BaseResourceVariable

from flowlayers.backend_common import replica_rows
from flowlayers.errors import ConfigError
from flowlayers.sbp import Split

from . import devices, placements
from .collectives import Collectives, next_group_key
from .consistent import ConsistentExecutable
from .lowering import step_error
from .mirrored import MirroredExecutable
from .staged import StagedExecutable
from .variables import SharedConstants, draw, initial_value

_block_ids = itertools.count()     # unique ids of the per-device block variables (device_blocks)


def make(view, device_num, mesh, cluster=None):
    """The runtime of ``view`` on ``device_num`` devices (``mesh``: the consistent view's axes)."""
    strategy = None
    if cluster is not None:     # several processes: join TF's distributed runtime for the view, once
        if device_num % cluster.count:
            raise ConfigError(f"runtime: expected a device count that is a multiple of the {cluster.count} "
                              f"processes, received {device_num}")
        strategy = devices.join(view, cluster, cluster.local(device_num))
    if view == "consistent" and device_num > 1:
        return ConsistentRuntime(device_num, mesh, cluster)
    return StrategyRuntime(view, device_num, mesh, cluster, strategy)


class ConsistentRuntime:
    view = "consistent"

    def __init__(self, n, mesh_axes, cluster=None):
        self.devices = devices.devices(n, cluster)     # this process's
        self.cluster = cluster
        self.axes = list(mesh_axes)
        self.num_replicas = n
        self.native_nchw = devices.is_gpu(self.devices[0])
        kind = "GPU" if self.native_nchw else "CPU"
        # on CPU meshes a step's all-reduces are grouped as its gradients' sizes call for; GPU meshes keep DTensor's
        # default (measured on CPU only)
        self.groups_all_reduces = kind == "CPU"
        if cluster:     # process p's devices are global devices p * local .. (p + 1) * local - 1
            self.mesh = dtensor.create_distributed_mesh(self.axes, local_devices=[d.replace("/device:", "")
                                                                                  for d in self.devices],
                                                        device_type=kind)
        else:
            self.mesh = dtensor.create_mesh(self.axes, devices=[d.replace("/device:", "") for d in self.devices],
                                            device_type=kind)
        self._draws, self._constants, self._meshes = {}, SharedConstants(), {None: self.mesh}
        self._gather_mesh = None        # several processes: a one-axis mesh of all devices (``gather``)

    def __repr__(self):
        return f"<tensorflow runtime view=consistent mesh={dict(self.axes)}>"

    # Layouts ------------------------------------------------------------
    def mesh_for(self, placement):
        """The mesh of a placement: all devices (None), or a one-axis mesh over some of them, each holding whole
        tensors (``flow.scope.placement("gpu", "0:1")``).  DTensor moves tensors between meshes with
        ``copy_to_mesh`` inside a step function, gradients included."""
        if placement not in self._meshes:
            if self.cluster:
                raise ConfigError(f"flow.scope.placement on devices {list(placement)}: expected no placement on some "
                                  f"devices in a job of {self.cluster.count} processes, received one; the tensorflow "
                                  f"backend places ops on all devices there (run the placement in one process)")
            (axis, _), = self.axes
            self._meshes[placement] = dtensor.create_mesh(
                [(axis, len(placement))], devices=[self.devices[d].replace("/device:", "") for d in placement],
                device_type=self.mesh.device_type())
        return self._meshes[placement]

    def layout(self, nd_sbp, rank, mesh=None):
        """nd-SBP -> DTensor Layout; P has no layout and is read as replicated."""
        spec = [dtensor.UNSHARDED] * rank
        for (axis, _), sbp in zip(self.axes, nd_sbp):
            if isinstance(sbp, Split):
                spec[sbp.axis] = axis
        return dtensor.Layout(spec, mesh or self.mesh)

    def replicated(self, rank, mesh=None):
        return dtensor.Layout.replicated(mesh or self.mesh, rank)

    def to_mesh(self, value, layout):
        """A host array -> a DTensor in ``layout``: each device receives its block only, never the whole array."""
        value = np.asarray(value)
        return dtensor.pack([tf.constant(value[block]) for block in self._blocks(layout, value.shape)], layout)

    def _blocks(self, layout, shape, local=True):
        """Per device of the layout's mesh (in its order), the block of a tensor of ``shape`` it holds: this
        process's devices (``local``), or all."""
        mesh = layout.mesh
        blocks = []
        coordinates = _coordinates(mesh)
        for coords in [coordinates[i] for i in mesh.local_device_ids()] if local else coordinates:
            block = []
            for dim, axis in enumerate(layout.sharding_specs):
                if axis in coords:
                    size = shape[dim] // mesh.dim_size(axis)
                    block.append(slice(coords[axis] * size, (coords[axis] + 1) * size))
                else:
                    block.append(slice(None))
            blocks.append(tuple(block))
        return blocks

    # Variables ----------------------------------------------------------
    def variable_layout(self, spec):
        """The DTensor layout of VariableSpec ``spec``: its nd-SBP, on the mesh of its placement."""
        return self.layout(spec.nd_sbp, len(spec.shape), self.mesh_for(spec.devices))

    def create_variable(self, spec, value=None):
        """A DVariable for VariableSpec ``spec``, holding ``value`` or drawn anew, in its layout."""
        layout = self.variable_layout(spec)
        if value is not None:
            return dtensor.DVariable(self.to_mesh(value, layout), trainable=spec.trainable)
        drawn = self._constants.get(spec, layout.to_string(), lambda: self._drawn(spec, layout))
        return dtensor.DVariable(drawn, trainable=spec.trainable)

    def _drawn(self, spec, layout):
        """``var``'s initial value, drawn on the devices, replicated (the same numbers as one device), then sliced
        locally: no host copy.  The seed goes in as two float64 scalars, which DTensor puts on the default mesh
        itself, faster than a ``copy_to_mesh``."""
        replicated = self.replicated(len(spec.shape), layout.mesh)
        with dtensor.default_mesh(layout.mesh):
            drawn = dtensor.call_with_layout(self._draw(spec), replicated,
                                             *[tf.constant(s, tf.float64) for s in spec.seed])
        if layout != replicated:        # (an eager relayout costs even when it moves nothing: 800 in a deep MLP)
            drawn = dtensor.relayout(drawn, layout)
        return drawn

    def _draw(self, spec):
        """One traced draw per initializer, shape and dtype, the seed its input (not one traced and compiled per
        variable: bench/RESULTS_design.md); float64, as DTensor folds small int inputs into the program as
        constants."""
        sampler, shape, dtype, path = spec.sampler, spec.shape, spec.dtype, spec.path
        key = (repr(sampler), shape, dtype)
        if key not in self._draws:
            # a partial, not a lambda: TF warns of "frequent retracing" by code object, and every key traces once
            self._draws[key] = tf.function(functools.partial(_draw_from_pair, sampler, shape, dtype, path),
                                           autograph=False)
        return self._draws[key]

    def read(self, handle):
        """The full value, assembled on the host from each device's shard (no device holds it whole)."""
        value = tf.convert_to_tensor(handle)
        if self.cluster:    # other processes hold blocks too: whole on every device, read from one
            with dtensor.default_mesh(self.mesh):
                return dtensor.unpack(dtensor.relayout(value, self.replicated(value.shape.rank)))[0].numpy()
        full = np.empty(value.shape, value.dtype.as_numpy_dtype)
        for block, shard in zip(self._blocks(dtensor.fetch_layout(value), full.shape), dtensor.unpack(value)):
            full[block] = shard.numpy()
        return full

    def write(self, handle, value):
        handle.assign(self.to_mesh(value.astype(handle.dtype.as_numpy_dtype), dtensor.fetch_layout(handle)))

    def shard_shapes(self, handle):
        if self.cluster:    # every device's, this process's and the others': from the layout
            shape = handle.shape
            return [tuple(len(range(*b.indices(n))) for b, n in zip(block, shape))
                    for block in self._blocks(handle.layout, shape, local=False)]
        return [tuple(t.shape) for t in dtensor.unpack(tf.convert_to_tensor(handle))]

    def holders(self, handle):
        """Indices of the devices holding the variable: its mesh's."""
        if self.cluster:    # (no placements on some devices here: every device)
            return list(range(self.num_replicas))
        return self.device_indices(handle.layout.mesh)

    def barrier(self, name):
        """Return once every process reached ``barrier(name)`` (DTensor's: an all-reduce over the mesh, then the
        coordination service's barrier); at once without a cluster."""
        if self.cluster:
            dtensor.barrier(self.mesh, name)

    def gather(self, array):
        """Every process's host ``array`` (the same shape in each) joined along dim 0 in process order, in every
        process: each device holds its process's array as one row of a tensor split over a one-axis mesh of all
        devices, relaid out replicated (DTensor's all-gather); each process's first device's row is kept."""
        array = np.asarray(array)
        if not self.cluster:
            return array
        if self._gather_mesh is None:
            self._gather_mesh = dtensor.create_distributed_mesh(
                [("flowlayers_all", self.num_replicas)], device_type=self.mesh.device_type(),
                local_devices=[d.replace("/device:", "") for d in self.devices])
        mesh = self._gather_mesh
        rows = dtensor.pack([tf.constant(array[None])] * len(self.devices),
                            dtensor.Layout.batch_sharded(mesh, "flowlayers_all", array.ndim + 1))
        with dtensor.default_mesh(mesh):
            whole = dtensor.unpack(dtensor.relayout(rows, dtensor.Layout.replicated(mesh, array.ndim + 1)))[0].numpy()
        return whole[::len(self.devices)].reshape((-1,) + array.shape[1:])

    def device_blocks(self, handles):
        """Per device of the mesh, ``{path: the block it holds}`` for DVariables by path: each block a TF variable
        on that device sharing the DVariable's storage, so writing it writes the DVariable.  A variable of a
        placement on some devices has blocks on those only."""
        per_device = [{} for _ in self.devices]
        for path, handle in handles.items():
            layout = handle.layout
            shape = [n // layout.mesh.dim_size(axis) if axis in layout.mesh.dim_names else n
                     for n, axis in zip(handle.shape, layout.sharding_specs)]
            for i, block in zip(self.device_indices(layout.mesh), dtensor.unpack(handle.handle)):
                per_device[i][path] = BaseResourceVariable(
                    trainable=False, shape=shape, dtype=handle.dtype, handle=block,
                    unique_id=f"flowlayers_block_{next(_block_ids)}", in_graph_mode=False)
        return per_device

    def tiling_blocks(self, handle):
        """Positions (in the variable's mesh order) of blocks that together hold the variable once: those at the
        first coordinate of every mesh axis that does not split it."""
        layout = handle.layout
        used = set(layout.sharding_specs)
        return [i for i, coords in enumerate(_coordinates(layout.mesh))
                if all(c == 0 for a, c in coords.items() if a not in used)]

    def device_indices(self, mesh):
        """Which of this runtime's devices ``mesh`` holds, in the mesh's order."""
        def short(name):        # "CPU:1", however the name is spelled
            return name.split("/")[-1].replace("device:", "")

        names = [short(d) for d in self.devices]
        return [names.index(short(d)) for d in mesh.local_devices()]

    # Steps --------------------------------------------------------------
    def compile(self, program, plan, seed):
        if placements.hangs(program) is not None:       # one step function would hang: a function per stage
            return StagedExecutable(self, program, plan, seed)
        return ConsistentExecutable(self, program, plan, seed)

    def place(self, feed, nd_sbp):
        """A global host batch -> a DTensor with each device holding its shard only."""
        feed = np.asarray(feed)
        return self.to_mesh(feed, self.layout(nd_sbp, feed.ndim))

    def wrap_error(self, program, error, graphs=()):
        return step_error(program, error, graphs)


class StrategyRuntime(Collectives):


    def __init__(self, view, n, mesh=None, cluster=None, strategy=None):
        self.view, self.devices, self.cluster = view, devices.devices(n, cluster), cluster
        # the consistent view on one device keeps its mesh's axis names (each of size 1); replicas are an axis
        self.axes = list(mesh) if view == "consistent" and mesh else [("replica", n)]
        self.num_replicas = n
        self.first = cluster.index * len(self.devices) if cluster else 0    # this process's first global replica
        self.native_nchw = devices.is_gpu(self.devices[0])
        self._constants = SharedConstants()
        if strategy is None:
            strategy = _mirrored_strategy(self.devices) if n > 1 else tf.distribute.get_strategy()
        self.strategy = strategy
        if n > 1:
            self.group_key = next_group_key()
            # one per device: the collectives of a step are ordered through it (without, TF may run none)
            self._tokens = []
            for device in self.devices:
                with tf.device(device):
                    self._tokens.append(tf.Variable(0.0, trainable=False, name="collective_ordering"))

    def __repr__(self):
        return f"<tensorflow runtime view={self.view} devices={self.devices}>"

    def scope(self):
        return self.strategy.scope() if self.num_replicas > 1 else tf.device(self.devices[0])

    # Variables ----------------------------------------------------------
    def create_variable(self, spec, value=None):
        """A variable (one copy per replica) for VariableSpec ``spec``, holding ``value`` or drawn anew."""
        with self.scope():
            if value is not None:
                init = tf.constant(value)
            else:
                init = self._constants.get(spec, None, lambda: initial_value(spec))
            return tf.Variable(init, trainable=spec.trainable)

    def read(self, handle):
        return np.array(handle.numpy())

    def write(self, handle, value):
        handle.assign(value)

    def shard_shapes(self, handle):
        """Shape of the copy each device holds, read from the variable's per-device values (every process's copies
        are alike)."""
        shapes = [tuple(v.shape) for v in getattr(handle, "values", (handle,))]
        return shapes * (self.num_replicas // len(shapes))

    def holders(self, handle):
        """Indices of the devices holding the variable: every replica."""
        if self.cluster:
            return list(range(self.num_replicas))
        return list(range(len(getattr(handle, "values", (handle,)))))

    def barrier(self, name):
        """Return once every process reached ``barrier(name)``: a one-number all-reduce (at once without a
        cluster)."""
        if self.cluster:
            self._process_sum(np.zeros(1, np.float32))

    def gather(self, array):
        """Every process's host ``array`` (the same shape in each) joined along dim 0 in process order, in every
        process: a collective of zeros that each process fills at its place."""
        array = np.asarray(array)
        if not self.cluster:
            return array
        buffer = np.zeros((self.cluster.count,) + array.shape, array.dtype)
        buffer[self.cluster.index] = array
        return self._process_sum(buffer).reshape((-1,) + array.shape[1:])

    # Steps --------------------------------------------------------------
    def compile(self, program, plan, seed):
        return MirroredExecutable(self, program, plan, seed)

    def place(self, feed, kind):
        """A host batch -> the step's input: one tensor per device, its rows of the batch (or its own array)."""
        if kind == "list":
            parts = feed
        else:
            parts = replica_rows(feed, self.num_replicas)
        if self.cluster and len(parts) != self.num_replicas:
            raise ConfigError(f"list input: expected one array per device of every process ({self.num_replicas}), "
                              f"received {len(parts)}")
        placed = []
        for device, part in zip(self.devices, parts[self.first:]):      # this process's replicas' rows
            with tf.device(device):
                placed.append(tf.constant(part))
        return placed

    def local_variables(self, handles, i):
        """``{path: the copy device i holds}`` for engine handles by path."""
        if self.num_replicas == 1:
            return handles
        return {path: self.strategy.experimental_local_results(h)[i] for path, h in handles.items()}

    def fetch(self, value, mode):
        """A step output (one tensor per device) -> host numpy, per the Program's output mode."""
        if mode == "sum":
            return value[0].numpy()     # the same on every device
        parts = [t.numpy() for t in value]
        if self.cluster:
            parts = self._gathered(parts)
        if mode == "list":
            return parts
        if parts[0].ndim == 0:
            return np.mean(parts, dtype=parts[0].dtype) if len(parts) > 1 else parts[0]
        return np.concatenate(parts, axis=0) if len(parts) > 1 else parts[0]

    def wrap_error(self, program, error, graphs=()):
        return step_error(program, error, graphs)


def _coordinates(mesh):
    """Per device of ``mesh``, in its order, ``{axis: the device's index along it}``."""
    names = list(mesh.dim_names)
    sizes = [mesh.dim_size(a) for a in names]
    return [dict(zip(names, np.unravel_index(i, sizes))) for i in range(int(np.prod(sizes)))]


def _draw_from_pair(sampler, shape, dtype, path, seed_0, seed_1):
    return draw(sampler, shape, dtype, tf.stack([seed_0, seed_1]), path)


_strategies_made = [0]



def _mirrored_strategy(devices):
    """A MirroredStrategy whose collective group keys cannot collide with another's in this process.

    Each MirroredStrategy numbers its collective groups from ``1 + _collective_key_base`` (0 by
    default), so a 2-device and a 4-device strategy in one process would both use group 1 and
    abort ("joining a group with size 4, but that group has size 2").
    """
    _strategies_made[0] += 1
    base = 1_000_000 * _strategies_made[0]
    cls = type("MirroredStrategy", (tf.distribute.MirroredStrategy,), {"_collective_key_base": base})
    return cls(devices)

