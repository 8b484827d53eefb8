"""Runtimes of the single-device and mirrored views: one ``tf.distribute`` strategy each.

One device uses TF's default strategy pinned to that device; N devices use
``MirroredStrategy``.  The same step code serves both.
"""
import numpy as np
import tensorflow as tf


from . import devices
from .executable import Executable
from .lowering import step_error
from .variables import initial_value


class StrategyRuntime:
    view_name = "mirrored"

    def __init__(self, view, n):
        self.view, self.devices = view, devices.devices(n)
        self.num_replicas = n
        self.native_nchw = devices.is_gpu(self.devices[0])
        self.strategy = _mirrored_strategy(self.devices) if n > 1 else tf.distribute.get_strategy()

    def __repr__(self):
        return f"<tensorflow runtime view={self.view} devices={self.devices}>"

    def scope(self):
        return self.strategy.scope() if self.num_replicas > 1 else tf.device(self.devices[0])

    # Variables ----------------------------------------------------------
    def create_variable(self, var, value=None):
        with self.scope():
            init = initial_value(var) if value is None else tf.constant(value)
            return tf.Variable(init, trainable=var.trainable, name=var.path.replace("/", "."))

    def read(self, handle):
        return np.array(handle.numpy())

    def write(self, handle, value):
        handle.assign(value)

    def shard_shapes(self, handle):
        """Shape of the copy each device holds, read from the variable's per-device values."""
        return [tuple(v.shape) for v in getattr(handle, "values", (handle,))]

    # Steps --------------------------------------------------------------
    def compile(self, program):
        return Executable(self, program)

    def place(self, feed, kind):
        """A host batch -> the step's input: a tensor, or one per replica."""
        if self.num_replicas == 1:
            with tf.device(self.devices[0]):
                return tf.constant(feed[0] if kind == "list" else feed)
        parts = feed if kind == "list" else np.array_split(feed, self.num_replicas)
        return self.strategy.experimental_distribute_values_from_function(
            lambda ctx: tf.constant(parts[ctx.replica_id_in_sync_group]))

    def local_results(self, value):
        return [t.numpy() for t in self.strategy.experimental_local_results(value)]

    def fetch(self, value, mode):
        """A step output -> host numpy, per the Program's output mode."""
        parts = self.local_results(value)
        if mode == "list":
            return parts
        if mode == "sum":
            return parts[0]
        if parts[0].ndim == 0:
            return np.mean(parts, dtype=parts[0].dtype) if len(parts) > 1 else parts[0]
        return np.concatenate(parts, axis=0) if len(parts) > 1 else parts[0]

    def wrap_error(self, program, error):
        return step_error(program, error)


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
