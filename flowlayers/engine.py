"""Finding and starting backends.  The front end meets an engine only here.

Backends register under the entry-point group ``flowlayers.backends``; the entry point names a class satisfying
``contract.Backend``.  Its ``capabilities`` are read without starting (or importing) the engine, so planning works
where only numpy is installed; a runtime, made once per Placement's devices and mesh, is what starts it.
"""
import importlib.util
from importlib import metadata

import numpy as np

from . import env, settings
from .contract import Placement
from .errors import ConfigError, InputError

GROUP = "flowlayers.backends"
_backends = {}
_runtimes = {}
_cache_in_force = {}    # backend name -> the compilation cache directory handed to it (None: off)
_default = []


def _entry_points():
    return {ep.name: ep for ep in metadata.entry_points(group=GROUP)}


def available():
    """Names of the installed backends."""
    return sorted(_entry_points())


def check_name(name, what):
    """``name`` if a backend of that name is installed, else a ConfigError listing those that are."""
    installed = available()
    if name not in installed:
        raise ConfigError(f"{what}: expected one of the installed backends {installed}, received {name!r}"
                          + ("; use one of those, or install the package that provides it" if installed else
                             "; install one, e.g. pip install 'flowlayers[tensorflow-cpu]'"))
    return name


def backend(name=None):
    """The backend ``name`` (default: the one configured), its class loaded once.  Loading it imports no engine."""
    name = name or backend_name()
    if name not in _backends:
        ep = _entry_points().get(check_name(name, "backend (flow.config.set_backend or $FLOWLAYERS_BACKEND)"))
        _backends[name] = ep.load()()
    return _backends[name]


def capabilities(name=None):
    """What backend ``name`` (default: the one configured) can do, without its engine."""
    return backend(name).capabilities


def has_engine(name=None):
    """Whether backend ``name``'s engine is installed here (looked up, not imported)."""
    return importlib.util.find_spec(capabilities(name).engine) is not None


def default_name():
    """The first installed backend whose engine is installed, ``tensorflow`` first (looked up once);
    ``tensorflow`` where none is, so that the error names it."""
    if not _default:
        installed = sorted(available(), key=lambda name: name != "tensorflow")
        usable = [name for name in installed if has_engine(name)]
        _default.append(usable[0] if usable else "tensorflow")
    return _default[0]


def backend_name():
    """The engine that runs models: the one set, else ``$FLOWLAYERS_BACKEND``, else ``tensorflow`` where it is
    installed, else the first installed backend."""
    return settings.backend_set() or default_name()


def placement(view=None):
    """The settings in force as one immutable value, for ``view`` (default: the view in force): what a compile,
    a ``fit`` or a job call takes once and hands down."""
    view = view or settings.view()
    mesh = tuple(settings.mesh_shape().items()) if view == "consistent" else ()
    return Placement(backend_name(), view, settings.device_num(), mesh, tuple(settings.layout_rules().items()),
                     settings.seed(), env.cluster(), settings.compilation_cache())


def _engine_of(name, what):
    """Backend ``name``, refused by name where its engine is not installed."""
    if not has_engine(name):
        raise ConfigError(f"backend {name!r}: {what} expected its engine {capabilities(name).engine!r} to be "
                          f"importable, received none installed; install it, e.g. pip install "
                          f"'flowlayers[{'tensorflow-cpu' if name == 'tensorflow' else name}]'")
    return backend(name)


def check_device_count(n, what):
    """Raise now if ``n`` devices cannot be had.  The backend sets its devices up now if it still can: engine code
    the user runs next (a tf.data pipeline) would otherwise start the engine with one device.  Where the engine is
    not installed the check waits for the first runtime (planning needs no devices)."""
    name = backend_name()
    if name in available() and has_engine(name):
        backend(name).check_device_count(n, what)


def join_processes(view):
    """Several processes: let the backend join its engine's distributed runtime now that this process's device
    count is set (``view``: the view set explicitly, else None), before user code (a tf.data pipeline, a JAX
    array) starts the engine on its own.  A backend that needs the view to join waits for one; the first runtime
    joins otherwise."""
    cluster, name = env.cluster(), backend_name()
    if cluster is None or not settings.device_num_set() or name not in available() or not has_engine(name):
        return
    if capabilities(name).processes:
        backend(name).join(view, settings.device_num(), cluster)


def runtime(placement):
    """The runtime for ``placement``: its backend, view, device count and mesh.  Made once and then reused."""
    key = placement.runtime_key
    _cache_compilations(placement)      # before anything compiles
    if key not in _runtimes:
        engine = _engine_of(placement.backend, "running a step")
        views = engine.capabilities.views
        if placement.view not in views:
            raise ConfigError(f"view {placement.view!r}: backend {placement.backend!r} runs the views {list(views)}, "
                              f"received {placement.view!r}; choose one of those or another backend")
        mesh = placement.mesh if placement.consistent else None
        if placement.cluster is not None and not engine.capabilities.processes:
            raise ConfigError(f"backend {placement.backend!r}: expected a backend that runs one program over several "
                              f"processes, received one that runs in one process only (this job has "
                              f"{placement.cluster.count}); start the script without python -m flowlayers.launch, or "
                              f"choose a backend whose capabilities say processes=True")
        _runtimes[key] = engine.runtime(placement.view, placement.device_num, mesh, placement.cluster)
    return _runtimes[key]


def check_compilation_cache(name, what):
    """Refuse a compilation cache, naming ``what``, on backend ``name`` if it keeps none."""
    if not capabilities(name).caches_compilations:
        raise ConfigError(f"{what}: expected a backend that keeps compiled programs on disk (jax), received backend "
                          f"{name!r}, which keeps none; unset the cache (flow.config.set_compilation_cache(''), or "
                          f"unset FLOWLAYERS_COMPILATION_CACHE), or use the jax backend")


def _cache_compilations(placement):
    """Hand the placement's compilation cache (a directory, or None: off) to its backend, when it changed."""
    if _cache_in_force.get(placement.backend, None) == placement.compilation_cache:
        return
    if placement.compilation_cache is not None:
        check_compilation_cache(placement.backend, "compilation cache "
                                f"{placement.compilation_cache!r} (flow.config.set_compilation_cache or "
                                f"$FLOWLAYERS_COMPILATION_CACHE)")
    if capabilities(placement.backend).caches_compilations:
        backend(placement.backend).cache_compilations(placement.compilation_cache)
    _cache_in_force[placement.backend] = placement.compilation_cache


def _joined():
    """A runtime of the job's processes: one running already, else the one the settings in force give."""
    running = [rt for key, rt in _runtimes.items() if key[-1] is not None]
    return running[0] if running else runtime(placement())


def barrier(name):
    """Return once every process of the job reached ``barrier(name)`` (at once where there is one process)."""
    if env.cluster() is not None:
        _joined().barrier(name)


def gather_processes(arrays, what):
    """Every process's ``arrays`` (its share of a batch, rows first) joined in process order, in every process:
    the global batch.  The shares must have the same shapes in every process."""
    if env.cluster() is None:
        return list(arrays)
    rt = _joined()
    shapes = rt.gather(np.array([[len(a.shape)] + list(a.shape) + [0] * (8 - len(a.shape)) for a in arrays],
                                np.int64)[None])
    if any(not np.array_equal(s, shapes[0]) for s in shapes):
        described = [[tuple(int(d) for d in row[1:1 + row[0]]) for row in s] for s in shapes]
        raise InputError(f"{what}: expected every process to feed a share of the same shapes, received "
                         f"{ {p: d for p, d in enumerate(described)} } (by process); give each process's dataset the "
                         f"same batch size and number of batches")
    return [rt.gather(np.ascontiguousarray(a)).reshape((-1,) + a.shape[1:]) for a in arrays]
