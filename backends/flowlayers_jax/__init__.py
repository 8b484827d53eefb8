"""The ``jax`` backend: the consistent view as ``jax.sharding`` (a ``NamedSharding`` per planned SBP), the mirrored
view as a ``shard_map`` over one ``replica`` axis; each step one ``jax.jit`` (forward, backward and update).
Several processes (``python -m flowlayers.launch``): JAX's multi-controller mode, one mesh over the devices of all
of them (``devices.join``, ``runtime.py``).

Registered under the entry-point group ``flowlayers.backends``.  Custom ops get their kernels with
``register_kernel``.
"""
import jax

# flowlayers' dtypes include float64 and int64 (argmax, labels, casts): 64-bit types on.  Every array the backend
# makes names its dtype, so float32 models stay float32.
jax.config.update("jax_enable_x64", True)

from .kernels import register_kernel  # noqa: E402, F401


class Backend:
    name = "jax"
    #: capabilities, declared rather than discovered
    views = ("consistent", "mirrored")
    splits_dim_over_several_axes = True     # a PartitionSpec entry may name several mesh axes
    processes = True                        # one program over several processes: JAX's multi-controller mode

    def runtime(self, view, device_num, mesh, cluster=None):
        from . import devices
        from .runtime import Runtime

        devices.join(cluster)       # several processes: JAX's distributed runtime, before JAX starts
        return Runtime(view, device_num, mesh, cluster)

    def join(self, view, device_num, cluster):
        """Several processes: join JAX's distributed runtime now (any view), before user code starts JAX."""
        from . import devices

        devices.join(cluster)

    @property
    def kernels(self):
        """The op kernels by op name (``KERNELS[op](node, *inputs, ctx)``), custom ones included."""
        from .kernels import KERNELS

        return KERNELS

    def check_device_count(self, n, what):
        """Raise ConfigError naming ``what`` if ``n`` devices cannot be had in this process (see devices.py)."""
        from . import devices

        devices.check(n, what)
