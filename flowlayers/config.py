"""Process-wide configuration: each setting is one line, as in OneFlow.

    flow.config.gpu_device_num(2)
    flow.config.set_view("mirrored")          # or env FLOWLAYERS_VIEW
    flow.config.set_mesh(data=2, model=2)      # consistent view only
    flow.config.set_backend("tensorflow")      # or env FLOWLAYERS_BACKEND

Settings are validated when given, against each other and against what the
engine can give, and a rejected one changes nothing.  Setting a value starts
nothing: the backend answers whether it can give a device count without
starting its engine (TensorFlow on a CPU host records how many logical devices
to make when it starts, so a tf.data pipeline run next finds them).  A mesh
must fit the device count set before it (OneFlow's order: the count, then the
mesh); a mesh alone sets the count.  A count set after a mesh of another size
expects a new mesh next, and is refused where it is used if none came.  What
runs takes these settings once, as a ``Placement`` (``placement()``), when it
compiles or is called.
"""
import os
import re

from . import scope
from .errors import ConfigError

_state = {
    "device_num": None,   # None: 1 device until asked otherwise
    "view": None,         # None: env FLOWLAYERS_VIEW or "consistent"
    "mesh": None,         # None: one axis "data" over all devices
    "layout_rules": {},
    "backend": None,      # None: env FLOWLAYERS_BACKEND, else tensorflow if installed, else the one installed
    "seed": 0,
    "legacy_model_io": False,
    "nonfinite_inputs": False,    # NaN and infinity in float inputs and labels: refused unless allowed
}


def _positive_int(value, what):
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise ConfigError(f"{what}: expected a positive int, received {value!r}; pass a count of at least 1")
    return value


def gpu_device_num(n):
    """Use ``n`` devices of this process: GPUs where present, else ``n`` logical CPU devices.  In a job started by
    ``python -m flowlayers.launch`` every process gives ``n`` (OneFlow's count per machine), and the mesh spans the
    devices of all processes."""
    from . import engine

    what = f"flow.config.gpu_device_num({n!r})"
    _positive_int(n, what)
    engine.check_device_count(n, what)
    _state["device_num"], before = n, _state["device_num"]
    try:
        engine.join_processes(_explicit_view())
    except ConfigError:
        _state["device_num"] = before
        raise


def cpu_device_num(n):
    """OneFlow's name for the same setting on a CPU host."""
    gpu_device_num(n)


def device_num():
    """The devices of all processes: the count set times the processes, else the size of the mesh set, else one
    per process."""
    if _state["device_num"]:
        return _state["device_num"] * _processes()
    return _product(_state["mesh"]) if _state["mesh"] else _processes()


def _processes():
    from . import env

    return env.process_count()


def set_view(view):
    """Default view for everything built afterwards: 'consistent' or 'mirrored'.  In a job of several processes on
    an engine that joins its distributed runtime per view (tensorflow), set it before the first TensorFlow code."""
    from . import engine

    name = scope.as_view_name(view, "flow.config.set_view(view)")
    engine.join_processes(name)
    _state["view"] = name


def _explicit_view():
    """The view set by ``set_view`` or ``$FLOWLAYERS_VIEW``, or None where the default would be taken."""
    env = os.environ.get("FLOWLAYERS_VIEW")
    return _state["view"] or (scope.as_view_name(env, "environment variable FLOWLAYERS_VIEW") if env else None)


def view():
    """The view in force: a ``with`` scope, else ``set_view``, else ``$FLOWLAYERS_VIEW``, else consistent."""
    return scope.scoped_view() or _explicit_view() or "consistent"


_view_in_force = view    # placement(view=...) names its argument after it


def set_mesh(**axes):
    """Named mesh axes for the consistent view, e.g. ``set_mesh(data=2, model=2)``; ``set_mesh()`` resets."""
    from . import engine

    what = f"flow.config.set_mesh({_describe_mesh(axes)})"
    for name, size in axes.items():
        _positive_int(size, f"flow.config.set_mesh({name}=...)")
    if axes and _product(axes) % _processes():
        raise ConfigError(f"{what}: expected a mesh whose device count is a multiple of the {_processes()} processes "
                          f"of this job (each holds as many of its devices), received {_product(axes)} device(s)")
    if axes:
        engine.check_device_count(_product(axes) // _processes(), what)
    count = _state["device_num"] and device_num()
    if axes and count and _product(axes) != count:
        raise ConfigError(f"{what}: expected the product of the axis sizes to equal the device count {count} "
                          f"already set (flow.config.gpu_device_num({_state['device_num']})"
                          f"{f' in each of {_processes()} processes' if _processes() > 1 else ''}), received a mesh of "
                          f"{_product(axes)} device(s); set a mesh of {count} devices, or the device count "
                          f"first")
    _state["mesh"] = dict(axes) or None


def _product(mesh):
    total = 1
    for size in mesh.values():
        total *= size
    return total


def _describe_mesh(mesh):
    return ", ".join(f"{k}={v}" for k, v in mesh.items())


def mesh_shape():
    """``{axis: size}`` in force: the one from ``set_mesh`` or ``{"data": device_num()}``."""
    mesh = _state["mesh"] or {"data": device_num()}
    if _product(mesh) != device_num():     # a count set after a mesh for another count, and no mesh since
        raise ConfigError(
            f"flow.config.set_mesh({_describe_mesh(mesh)}): expected the product of the axis sizes to equal the "
            f"device count {device_num()} (flow.config.gpu_device_num), received a mesh of {_product(mesh)} "
            f"device(s); set a mesh of {device_num()} devices, or set_mesh() for one 'data' axis over all of them")
    return dict(mesh)


def set_layout_rules(rules):
    """``{regex: per-dim mesh axes}`` for variables, e.g. ``{"dense1/kernel": (None, "model")}``."""
    if not isinstance(rules, dict):
        raise ConfigError(f"flow.config.set_layout_rules(rules): expected a dict regex -> spec, received {type(rules).__name__}")
    for pattern, spec in rules.items():
        try:
            re.compile(pattern)
        except (re.error, TypeError) as e:
            raise ConfigError(f"layout rule {pattern!r}: expected a regular expression, received one that fails: {e}; "
                              f"escape characters meant literally with a backslash, e.g. r'dense\\(1\\)'") from None
        if not isinstance(spec, (tuple, list)) or not all(a is None or isinstance(a, str) for a in spec):
            raise ConfigError(f"layout rule {pattern!r}: expected a tuple of mesh-axis names or None, one per "
                              f"tensor dim, received {spec!r}; write e.g. (None, 'model') to split a kernel's columns")
    _state["layout_rules"] = {p: tuple(s) for p, s in rules.items()}


def layout_rules():
    return dict(_state["layout_rules"])


def set_backend(name):
    """The engine that runs models: one of the installed backends (entry-point group ``flowlayers.backends``);
    None: back to the default (``$FLOWLAYERS_BACKEND``, else tensorflow where installed)."""
    from . import engine

    _state["backend"] = None if name is None else engine.check_name(name, f"flow.config.set_backend({name!r})")


def backend_name():
    """The engine that runs models: the one set, else ``$FLOWLAYERS_BACKEND``, else ``tensorflow`` where it is
    installed, else the first installed backend."""
    if _state["backend"] or os.environ.get("FLOWLAYERS_BACKEND"):
        return _state["backend"] or os.environ["FLOWLAYERS_BACKEND"]
    from . import engine

    return engine.default_name()


def set_seed(seed):
    """Seed for initializers and dropout; the same seed gives the same weights in every view."""
    if isinstance(seed, bool) or not isinstance(seed, int):
        raise ConfigError(f"flow.config.set_seed(seed): expected an int, received {seed!r}")
    _state["seed"] = seed


def seed():
    return _state["seed"]


def placement(view=None):
    """The settings in force as one immutable value, for ``view`` (default: the view in force): what a compile,
    a ``fit`` or a job call takes once and hands down."""
    from .framework.placement import Placement

    view = view or _view_in_force()
    mesh = tuple(mesh_shape().items()) if view == "consistent" else ()
    from . import env

    return Placement(backend_name(), view, device_num(), mesh, tuple(_state["layout_rules"].items()), seed(),
                     env.cluster())


def enable_legacy_model_io(val=True):
    """OneFlow 0.3+'s switch between its two model-I/O interfaces: ``flow.train.CheckPoint`` (legacy) and
    ``flow.checkpoint.save/get`` with ``flow.load_variables`` (the new one).  flowlayers serves both at once,
    in one format, so programs written for either mode run as they are; the setting is recorded
    (``legacy_model_io_enabled()``) and changes no result."""
    if not isinstance(val, bool):
        raise ConfigError(f"flow.config.enable_legacy_model_io(val): expected True or False, received {val!r}")
    _state["legacy_model_io"] = val


def legacy_model_io_enabled():
    return _state["legacy_model_io"]


def allow_nonfinite_inputs(val=True):
    """Whether ``fit``, ``evaluate``, ``predict`` and the ``*_on_batch`` methods take NaN and infinity in float
    inputs and labels.  By default they refuse them by name (the input, how many, the first one's index) before
    any step runs: one NaN in a batch turns every weight into NaN at that step, silently (Keras does not check).
    Allow them for a model that handles them itself, e.g. one that masks NaN inputs::

        flow.config.allow_nonfinite_inputs(True)

    ``fit``, ``evaluate`` and ``predict`` take the setting once, when called.  Sample weights must be finite
    either way."""
    if not isinstance(val, bool):
        raise ConfigError(f"flow.config.allow_nonfinite_inputs(val): expected True or False, received {val!r}")
    _state["nonfinite_inputs"] = val


def nonfinite_inputs_allowed():
    return _state["nonfinite_inputs"]
