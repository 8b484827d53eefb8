"""The ``tensorflow`` backend: consistent view on TF DTensor, mirrored view on MirroredStrategy.

Several processes (``python -m flowlayers.launch``): the consistent view on DTensor multi-client, the mirrored view
on MultiWorkerMirroredStrategy; a process runs one of them (``devices.join``).

Registered under the entry-point group ``flowlayers.backends``.  Custom ops get their kernels with
``register_kernel`` (see tutorial 06).
"""
import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")   # before the first TensorFlow import: INFO lines stay quiet

from .kernels import register_kernel  # noqa: E402, F401


class Backend:
    name = "tensorflow"
    #: capabilities, declared rather than discovered
    views = ("consistent", "mirrored")
    splits_dim_over_several_axes = False    # a DTensor layout gives each tensor dim one mesh axis
    processes = True                        # one program over several processes: DTensor multi-client, MWMS

    def runtime(self, view, device_num, mesh, cluster=None):
        strategy = None
        if cluster is not None:     # several processes: join TF's distributed runtime for the view, once
            from . import devices

            if device_num % cluster.count:
                from flowlayers.errors import ConfigError

                raise ConfigError(f"runtime: expected a device count that is a multiple of the {cluster.count} "
                                  f"processes, received {device_num}")
            strategy = devices.join(view, cluster, cluster.local(device_num))
        if view == "consistent" and device_num > 1:
            from .consistent import ConsistentRuntime

            return ConsistentRuntime(device_num, mesh, cluster)
        from .mirrored import StrategyRuntime

        return StrategyRuntime(view, device_num, mesh, cluster, strategy)

    @property
    def supports(self):
        """``supports(op_name, signature)``: whether DTensor can realise an op's signature; the planner offers
        only those (consistent view)."""
        from .consistent import supports

        return supports

    def join(self, view, device_num, cluster):
        """Several processes: join TF's distributed runtime now, before user code starts TensorFlow, where the view
        is known (``view`` None: at the first runtime); a process joins for one view."""
        from . import devices

        if view is not None:
            devices.join(view, cluster, cluster.local(device_num))

    @property
    def kernels(self):
        """The op kernels by op name (``KERNELS[op](node, *inputs, ctx)``), custom ones included."""
        from .kernels import KERNELS

        return KERNELS

    def check_device_count(self, n, what):
        """Raise ConfigError naming ``what`` if ``n`` devices cannot be had in this process (see devices.py)."""
        from . import devices

        devices.check(n, what)
