"""Runtimes of the single-device and mirrored views.

One device: plain variables on that device.  N devices: ``MirroredStrategy`` variables (one copy per device);
the step (executable.py) runs each replica on its device's copies and agrees on gradients with one
collective all-reduce.  The same step code serves both.
"""
import itertools

import numpy as np
import tensorflow as tf


from . import devices
from .executable import Executable
from .lowering import step_error
from .variables import SharedConstants, initial_value


class StrategyRuntime:

    def __init__(self, view, n, mesh=None):
        self.view, self.devices = view, devices.devices(n)
        # the consistent view on one device keeps its mesh's axis names (each of size 1); replicas are an axis
        self.axes = list(mesh) if view == "consistent" and mesh else [("replica", n)]
        self.num_replicas = n
        self.native_nchw = devices.is_gpu(self.devices[0])
        self._constants = SharedConstants()
        self.strategy = _mirrored_strategy(self.devices) if n > 1 else tf.distribute.get_strategy()
        if n > 1:
            self.group_key = next(_group_keys)
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
        """Shape of the copy each device holds, read from the variable's per-device values."""
        return [tuple(v.shape) for v in getattr(handle, "values", (handle,))]

    def holders(self, handle):
        """Indices of the devices holding the variable: every replica."""
        return list(range(len(getattr(handle, "values", (handle,)))))

    # Steps --------------------------------------------------------------
    def compile(self, program, plan, seed):
        return Executable(self, program, plan, seed)

    def place(self, feed, kind):
        """A host batch -> the step's input: one tensor per device, its rows of the batch (or its own array)."""
        if kind == "list":
            parts = feed
        else:
            parts = np.array_split(feed, self.num_replicas) if self.num_replicas > 1 else [feed]
        placed = []
        for device, part in zip(self.devices, parts):
            with tf.device(device):
                placed.append(tf.constant(part))
        return placed

    def local_variables(self, handles, i):
        """``{path: the copy device i holds}`` for engine handles by path."""
        if self.num_replicas == 1:
            return handles
        return {path: self.strategy.experimental_local_results(h)[i] for path, h in handles.items()}

    def all_reduce(self, per_device):
        """Sum each position of ``per_device`` (one list of tensors per device) over the devices, inside a step.

        Logical CPU devices share the host's memory: each tensor is summed once, on the first device, and the
        others read the sum without a copy, where a ring collective copies and adds chunk by chunk.  Nothing is
        packed: copying tensors into and out of one vector cost more than it saved (both measured:
        bench/RESULTS_design.md).  GPUs use collectives, small tensors packed (``collective_all_reduce``).
        """
        if self.native_nchw:
            return self.collective_all_reduce(per_device)
        with tf.device(self.devices[0]):
            totals = [tf.add_n(list(tensors)) for tensors in zip(*per_device)]
        return [totals] * len(per_device)

    def collective_all_reduce(self, per_device):
        """``all_reduce`` by collectives: one per tensor of ``PACK_BYTES`` or more, one per dtype for the rest."""
        return self._packed(per_device, self._collective)

    def _collective(self, flats):
        instance, out = next(_instance_keys), []
        for device, flat, token in zip(self.devices, flats, self._tokens):
            with tf.device(device):
                out.append(tf.raw_ops.CollectiveReduceV2(
                    input=flat, group_size=self.num_replicas, group_key=self.group_key, instance_key=instance,
                    ordering_token=[token.handle], merge_op="Add", final_op="Id"))
        return out

    def _packed(self, per_device, reduce_flat):
        """Each dtype's small tensors flattened into one vector per device and reduced together by ``reduce_flat``
        (a reduction per tensor costs a rendezvous or a cross-device edge each: hundreds for a deep model), then
        split back.  A tensor of ``PACK_BYTES`` or more is reduced alone: packing it would copy it in and out for
        nothing, and alone its reduction starts as soon as the replicas have it, while the backward pass goes on."""
        out = [list(tensors) for tensors in per_device]
        packed = {}
        for j, t in enumerate(per_device[0]):
            if t.shape.num_elements() * t.dtype.size >= PACK_BYTES:
                for i, reduced in enumerate(reduce_flat([tensors[j] for tensors in per_device])):
                    out[i][j] = reduced
            else:
                packed.setdefault(t.dtype, []).append(j)
        for js in packed.values():
            shapes = [per_device[0][j].shape for j in js]
            flats = []
            for i, device in enumerate(self.devices):
                with tf.device(device):
                    flats.append(tf.concat([tf.reshape(per_device[i][j], [-1]) for j in js], 0))
            for i, (device, flat) in enumerate(zip(self.devices, reduce_flat(flats))):
                with tf.device(device):
                    pieces = tf.split(flat, [s.num_elements() for s in shapes])
                    for j, piece, shape in zip(js, pieces, shapes):
                        out[i][j] = tf.reshape(piece, shape)
        return out

    def fetch(self, value, mode):
        """A step output (one tensor per device) -> host numpy, per the Program's output mode."""
        if mode == "sum":
            return value[0].numpy()     # the same on every device
        parts = [t.numpy() for t in value]
        if mode == "list":
            return parts
        if parts[0].ndim == 0:
            return np.mean(parts, dtype=parts[0].dtype) if len(parts) > 1 else parts[0]
        return np.concatenate(parts, axis=0) if len(parts) > 1 else parts[0]

    def wrap_error(self, program, error, graphs=()):
        return step_error(program, error, graphs)


PACK_BYTES = 256 * 1024    # tensors this large are all-reduced alone, smaller ones packed together
_strategies_made = [0]
# group and instance keys of the steps' own collectives: apart from MirroredStrategy's (counted from 1 + base)
_group_keys = itertools.count(2_000_000_000, -1)
_instance_keys = itertools.count(1_000_000_000)


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
