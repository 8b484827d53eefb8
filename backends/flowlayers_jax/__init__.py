"""The ``jax`` backend: the consistent view as ``jax.sharding`` (a ``NamedSharding`` per planned SBP), the mirrored
view as a ``shard_map`` over one ``replica`` axis; each step one ``jax.jit`` (forward, backward and update).
Several processes (``python -m flowlayers.launch``): JAX's multi-controller mode, one mesh over the devices of all
of them (``devices.join``, ``runtime.py``).

Registered under the entry-point group ``flowlayers.backends``.  Importing this package imports no JAX: its
capabilities are plain data, and the engine starts with the first runtime.  Custom ops get their kernels with
``register_kernel``.
"""
from flowlayers.backend_common import CustomKernels, EngineModules
from flowlayers.contract import Capabilities

CUSTOM_KERNELS = CustomKernels()    # register_kernel's; the built-in table is loaded with the engine


def register_kernel(op_name, replace=False):
    """Decorator: ``fn(node, *inputs, ctx)`` lowers the op named ``op_name`` (a custom OpDef) to JAX ops.

        @register_kernel("l2_normalize")
        def l2_normalize(node, x, ctx):
            norm2 = jnp.sum(jnp.square(x), axis=-1, keepdims=True)
            return x * jax.lax.rsqrt(jnp.maximum(norm2, node.attrs["epsilon"]))
    """
    return CUSTOM_KERNELS.register(op_name, replace)


class Backend(EngineModules):
    name = "jax"
    capabilities = Capabilities(
        engine="jax", views=("consistent", "mirrored"),
        splits_dim_over_several_axes=True,     # a PartitionSpec entry may name several mesh axes
        processes=True,                         # JAX's multi-controller mode
        several_steps=True, takes_rows=True, shows_program=True,
        exports=("jax", "tf_saved_model"),     # tf_saved_model through jax2tf, where TensorFlow is installed
        caches_compilations=True)              # JAX's persistent compilation cache

    def runtime(self, view, device_num, mesh, cluster=None):
        self.module("devices").join(cluster)     # several processes: JAX's distributed runtime, before JAX starts
        return self.module("runtime").Runtime(view, device_num, mesh, cluster)     # the engine starts here

    def join(self, view, device_num, cluster):
        """Several processes: join JAX's distributed runtime now (any view), before user code starts JAX."""
        self.module("devices").join(cluster)

    def cache_compilations(self, directory):
        """Keep compiled programs in ``directory`` (None: none), JAX's persistent compilation cache."""
        self.module("compile_cache").use(directory)
