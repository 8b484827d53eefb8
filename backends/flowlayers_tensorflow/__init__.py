"""The ``tensorflow`` backend: consistent view on TF DTensor, mirrored view on MirroredStrategy.

Several processes (``python -m flowlayers.launch``): the consistent view on DTensor multi-client, the mirrored view
on MultiWorkerMirroredStrategy; a process runs one of them (``devices.join``).

Registered under the entry-point group ``flowlayers.backends``.  Importing this package imports no TensorFlow: its
capabilities are plain data, and the engine starts with the first runtime.  Custom ops get their kernels with
``register_kernel`` (see tutorial 06).
"""
import os

from flowlayers.backend_common import CustomKernels, EngineModules
from flowlayers.contract import Capabilities
from flowlayers.errors import ConfigError

from .signatures import supports

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")   # before the first TensorFlow import: INFO lines stay quiet

CUSTOM_KERNELS = CustomKernels()    # register_kernel's; the built-in table is loaded with the engine


def register_kernel(op_name, replace=False):
    """Decorator: ``fn(node, *inputs, ctx)`` lowers the op named ``op_name`` (a custom OpDef) to TF ops.

        @register_kernel("l2_normalize")
        def l2_normalize(node, x, ctx):
            return tf.math.l2_normalize(x, axis=-1, epsilon=node.attrs["epsilon"])
    """
    return CUSTOM_KERNELS.register(op_name, replace)


class Backend(EngineModules):
    name = "tensorflow"
    capabilities = Capabilities(
        engine="tensorflow", views=("consistent", "mirrored"), supports=supports,
        splits_dim_over_several_axes=False,    # a DTensor layout gives each tensor dim one mesh axis
        processes=True,                         # DTensor multi-client, MultiWorkerMirroredStrategy
        exports=("tf_saved_model",))

    def runtime(self, view, device_num, mesh, cluster=None):
        return self.module("runtime").make(view, device_num, mesh, cluster)     # the engine starts here

    def join(self, view, device_num, cluster):
        """Several processes: join TF's distributed runtime now, before user code starts TensorFlow, where the view
        is known (``view`` None: at the first runtime); a process joins for one view."""
        if view is not None:
            self.module("devices").join(view, cluster, cluster.local(device_num))

    def cache_compilations(self, directory):
        """Refused: TensorFlow keeps its traced steps in the process only (capabilities: caches_compilations is
        False, so the front end refuses the setting first)."""
        raise ConfigError(f"compilation cache {directory!r}: the tensorflow backend keeps no compiled programs on "
                          f"disk; expected no cache, or the jax backend")
