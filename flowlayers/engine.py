"""Finding and starting backends.  The front end meets an engine only here.

Backends register under the entry-point group ``flowlayers.backends``; the
entry point names a class with ``runtime(view, device_num, mesh)``.
"""
from importlib import metadata

from . import config
from .errors import ConfigError

GROUP = "flowlayers.backends"
_backends = {}
_runtimes = {}


def available():
    """Names of the installed backends."""
    return sorted(ep.name for ep in metadata.entry_points(group=GROUP))


def backend(name=None):
    name = name or config.backend_name()
    if name not in _backends:
        eps = {ep.name: ep for ep in metadata.entry_points(group=GROUP)}
        if name not in eps:
            raise ConfigError(f"backend: expected one of the installed backends {sorted(eps)}, received {name!r} "
                              f"(flow.config.set_backend or FLOWLAYERS_BACKEND)")
        _backends[name] = eps[name].load()()
    return _backends[name]


def runtime(view=None):
    """The runtime for the view, device count and mesh in force, made once and then reused."""
    view = view or config.view()
    mesh = tuple(config.mesh_shape().items()) if view == "consistent" else None
    key = (config.backend_name(), view, config.device_num(), mesh)
    if key not in _runtimes:
        _runtimes[key] = backend().runtime(view, config.device_num(), mesh)
    return _runtimes[key]
