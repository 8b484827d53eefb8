"""A runtime for one view, device count and mesh: DTensor for the consistent view on several devices, a
MirroredStrategy otherwise; several processes join TF's distributed runtime for the view first."""
from flowlayers.errors import ConfigError

from . import devices
from .consistent import ConsistentRuntime
from .mirrored import StrategyRuntime


def make(view, device_num, mesh, cluster=None):
    strategy = None
    if cluster is not None:     # several processes: join TF's distributed runtime for the view, once
        if device_num % cluster.count:
            raise ConfigError(f"runtime: expected a device count that is a multiple of the {cluster.count} "
                              f"processes, received {device_num}")
        strategy = devices.join(view, cluster, cluster.local(device_num))
    if view == "consistent" and device_num > 1:
        return ConsistentRuntime(device_num, mesh, cluster)
    return StrategyRuntime(view, device_num, mesh, cluster, strategy)
