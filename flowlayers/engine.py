"""Finding and starting backends.  The front end meets an engine only here.

Backends register under the entry-point group ``flowlayers.backends``; the
entry point names a class with ``views`` (the views it runs),
``runtime(view, device_num, mesh)`` and ``check_device_count(n, what)`` (raise
ConfigError if ``n`` devices cannot be had in this process; may set the devices up).
"""
from importlib import metadata

from . import config, env
from .errors import ConfigError, InputError

GROUP = "flowlayers.backends"
_backends = {}
_runtimes = {}
_default = []


def _entry_points():
    return {ep.name: ep for ep in metadata.entry_points(group=GROUP)}


def available():
    """Names of the installed backends."""
    return sorted(_entry_points())


def default_name():
    """The first installed backend whose engine imports, ``tensorflow`` first (looked up once); ``tensorflow``
    where none does, so that the error names it."""
    if not _default:
        installed = sorted(available(), key=lambda name: name != "tensorflow")
        usable = [name for name in installed if _loads(name)]
        _default.append(usable[0] if usable else "tensorflow")
    return _default[0]


def _loads(name):
    try:
        _entry_points()[name].load()
        return True
    except ImportError:
        return False


def check_name(name, what):
    """``name`` if a backend of that name is installed, else a ConfigError listing those that are."""
    installed = available()
    if name not in installed:
        raise ConfigError(f"{what}: expected one of the installed backends {installed}, received {name!r}"
                          + ("; use one of those, or install the package that provides it" if installed else
                             "; install one, e.g. pip install 'flowlayers[tensorflow-cpu]'"))
    return name


def backend(name=None):
    """The backend ``name`` (default: the one configured), loaded once."""
    name = name or config.backend_name()
    if name not in _backends:
        ep = _entry_points().get(check_name(name, "backend (flow.config.set_backend or $FLOWLAYERS_BACKEND)"))
        try:
            cls = ep.load()
        except ImportError as e:
            raise ConfigError(f"backend {name!r}: expected its engine to be importable, received {e!r}; install "
                              f"it, e.g. pip install 'flowlayers[tensorflow-cpu]'") from e
        _backends[name] = cls()
    return _backends[name]


def check_device_count(n, what):
    """Raise now if ``n`` devices cannot be had.  The backend sets its devices up now if it still can: TensorFlow
    code the user runs next (a tf.data pipeline) would otherwise start the engine with one device.  Without an
    installed backend the check waits for the first runtime."""
    try:
        engine = backend()
    except ConfigError:
        return
    engine.check_device_count(n, what)


def join_processes(view):
    """Several processes: let the backend join its engine's distributed runtime now that this process's device
    count is set (``view``: the view set explicitly, else None), before user code (a tf.data pipeline, a JAX
    array) starts the engine on its own.  A backend that needs the view to join waits for one; the first runtime
    joins otherwise."""
    cluster = env.cluster()
    if cluster is None or not config._state["device_num"]:
        return
    try:
        engine = backend()
    except ConfigError:
        return
    if getattr(engine, "processes", False) and hasattr(engine, "join"):
        engine.join(view, config.device_num(), cluster)


def runtime(placement=None):
    """The runtime for ``placement`` (default: the settings in force): its backend, view, device count and mesh.
    Made once and then reused."""
    placement = placement or config.placement()
    key = placement.runtime_key
    if key not in _runtimes:
        engine = backend(placement.backend)
        if placement.view not in engine.views:
            raise ConfigError(f"view {placement.view!r}: backend {placement.backend!r} runs the views "
                              f"{list(engine.views)}, received {placement.view!r}; choose one of those or another "
                              f"backend")
        mesh = placement.mesh if placement.consistent else None
        if placement.cluster is None:
            _runtimes[key] = engine.runtime(placement.view, placement.device_num, mesh)
        elif not getattr(engine, "processes", False):
            raise ConfigError(f"backend {placement.backend!r}: expected a backend that runs one program over several "
                              f"processes, received one that runs in one process only (this job has "
                              f"{placement.cluster.count}); start the script without python -m flowlayers.launch, or "
                              f"choose a backend that declares processes = True")
        else:
            _runtimes[key] = engine.runtime(placement.view, placement.device_num, mesh, cluster=placement.cluster)
    return _runtimes[key]


def _joined(placement):
    """A runtime of the job's processes: one running already, else the one ``placement`` gives."""
    running = [rt for key, rt in _runtimes.items() if key[-1] is not None]
    return running[0] if running else runtime(placement)


def barrier(name):
    """Return once every process of the job reached ``barrier(name)`` (at once where there is one process)."""
    if env.cluster() is not None:
        _joined(config.placement()).barrier(name)


def gather_processes(arrays, what):
    """Every process's ``arrays`` (its share of a batch, rows first) joined in process order, in every process:
    the global batch.  The shares must have the same shapes in every process."""
    if env.cluster() is None:
        return list(arrays)
    import numpy as np

    rt = _joined(config.placement())
    shapes = rt.gather(np.array([[len(a.shape)] + list(a.shape) + [0] * (8 - len(a.shape)) for a in arrays],
                                np.int64)[None])
    if any(not np.array_equal(s, shapes[0]) for s in shapes):
        described = [[tuple(int(d) for d in row[1:1 + row[0]]) for row in s] for s in shapes]
        raise InputError(f"{what}: expected every process to feed a share of the same shapes, received "
                         f"{ {p: d for p, d in enumerate(described)} } (by process); give each process's dataset the "
                         f"same batch size and number of batches")
    return [rt.gather(np.ascontiguousarray(a)).reshape((-1,) + a.shape[1:]) for a in arrays]
