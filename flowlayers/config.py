"""Process-wide configuration, the user's face to the settings: each setting is one line, as in OneFlow.

    flow.config.gpu_device_num(2)
    flow.config.set_view("mirrored")          # or env FLOWLAYERS_VIEW
    flow.config.set_mesh(data=2, model=2)      # consistent view only
    flow.config.set_backend("tensorflow")      # or env FLOWLAYERS_BACKEND

Settings are validated when given, against each other and against what the engine can give, and a rejected one
changes nothing.  Setting a value starts nothing: the backend answers whether it can give a device count without
starting its engine (TensorFlow on a CPU host records how many logical devices to make when it starts, so a tf.data
pipeline run next finds them).  The values live in ``flowlayers.settings``; what runs takes them once, as a
``Placement`` (``placement()``), when it compiles or is called.
"""
import os

from . import engine, settings
from .errors import ConfigError
from .settings import (device_num, layout_rules, legacy_model_io_enabled, mesh_shape,  # noqa: F401
                       nonfinite_inputs_allowed, seed, set_seed, view)

__all__ = ["gpu_device_num", "cpu_device_num", "device_num", "set_view", "view", "set_mesh", "mesh_shape",
           "set_layout_rules", "layout_rules", "set_backend", "backend_name", "set_seed", "seed", "placement",
           "enable_legacy_model_io", "legacy_model_io_enabled", "allow_nonfinite_inputs", "nonfinite_inputs_allowed",
           "set_compilation_cache", "compilation_cache"]


def gpu_device_num(n):
    """Use ``n`` devices of this process: GPUs where present, else ``n`` logical CPU devices.  In a job started by
    ``python -m flowlayers.launch`` every process gives ``n`` (OneFlow's count per machine), and the mesh spans the
    devices of all processes."""
    what = f"flow.config.gpu_device_num({n!r})"
    settings.positive_int(n, what)
    engine.check_device_count(n, what)
    with settings.trial("device_num", n):
        engine.join_processes(settings.explicit_view())


def cpu_device_num(n):
    """OneFlow's name for the same setting on a CPU host."""
    gpu_device_num(n)


def set_view(view):
    """Default view for everything built afterwards: 'consistent' or 'mirrored'.  In a job of several processes on
    an engine that joins its distributed runtime per view (tensorflow), set it before the first TensorFlow code."""
    name = settings.as_view_name(view, "flow.config.set_view(view)")
    engine.join_processes(name)
    settings.set_view(name)


def set_mesh(**axes):
    """Named mesh axes for the consistent view, e.g. ``set_mesh(data=2, model=2)``; ``set_mesh()`` resets."""
    what = f"flow.config.set_mesh({settings.describe_mesh(axes)})"
    per_process = settings.mesh_devices_per_process(axes, what)
    if per_process:
        engine.check_device_count(per_process, what)
    settings.check_mesh_fits_count(axes, what)
    settings.set_mesh(axes)


def set_layout_rules(rules):
    """``{regex: per-dim mesh axes}`` for variables, e.g. ``{"dense1/kernel": (None, "model")}``."""
    settings.set_layout_rules(rules)


def set_backend(name):
    """The engine that runs models: one of the installed backends (entry-point group ``flowlayers.backends``);
    None: back to the default (``$FLOWLAYERS_BACKEND``, else tensorflow where installed)."""
    settings.set_backend(None if name is None else engine.check_name(name, f"flow.config.set_backend({name!r})"))


def backend_name():
    """The engine that runs models: the one set, else ``$FLOWLAYERS_BACKEND``, else ``tensorflow`` where it is
    installed, else the first installed backend."""
    return engine.backend_name()


def placement(view=None):
    """The settings in force as one immutable value, for ``view`` (default: the view in force): what a compile,
    a ``fit`` or a job call takes once and hands down."""
    return engine.placement(view)


def set_compilation_cache(directory):
    """Keep the programs the engine compiles in ``directory``, so that a later run (another process) of the same
    model, shapes and settings loads them instead of compiling again (JAX's persistent compilation cache: the jax
    backend; ``$FLOWLAYERS_COMPILATION_CACHE`` does the same).  ``None``: back to the environment variable's
    choice; ``""``: off.  It takes effect for the programs compiled after it; set it before the first model runs::

        flow.config.set_compilation_cache("~/.cache/flowlayers")

    Refused by name on a backend that keeps no such cache (tensorflow), here or where a step first runs."""
    what = f"flow.config.set_compilation_cache({directory!r})"
    if directory is not None and not isinstance(directory, (str, os.PathLike)):
        raise ConfigError(f"{what}: expected a directory path, '' (off) or None, received {type(directory).__name__}")
    directory = None if directory is None else os.path.expanduser(os.fspath(directory))
    if directory:
        engine.check_compilation_cache(engine.backend_name(), what)
    settings.set_compilation_cache(directory)


def compilation_cache():
    """The directory compiled programs are kept in, or None (off)."""
    return settings.compilation_cache()


def enable_legacy_model_io(val=True):
    """OneFlow 0.3+'s switch between its two model-I/O interfaces: ``flow.train.CheckPoint`` (legacy) and
    ``flow.checkpoint.save/get`` with ``flow.load_variables`` (the new one).  flowlayers serves both at once,
    in one format, so programs written for either mode run as they are; the setting is recorded
    (``legacy_model_io_enabled()``) and changes no result."""
    settings.set_legacy_model_io(val)


def allow_nonfinite_inputs(val=True):
    """Whether ``fit``, ``evaluate``, ``predict`` and the ``*_on_batch`` methods take NaN and infinity in float
    inputs and labels.  By default they refuse them by name (the input, how many, the first one's index) before
    any step runs: one NaN in a batch turns every weight into NaN at that step, silently (Keras does not check).
    Allow them for a model that handles them itself, e.g. one that masks NaN inputs::

        flow.config.allow_nonfinite_inputs(True)

    ``fit``, ``evaluate`` and ``predict`` take the setting once, when called.  Sample weights must be finite
    either way."""
    settings.set_nonfinite_inputs(val)
