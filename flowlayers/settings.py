"""The settings in force: state only, checked against each other, starting nothing.

``flow.config`` is the user's face to them: it checks a setting against the engine (can it give this many devices?)
before it stores it here.  What runs takes the settings once, as a ``contract.Placement`` (``engine.placement()``),
and hands that value down; nothing below the entry points reads this module.

A mesh must fit the device count set before it (OneFlow's order: the count, then the mesh); a mesh alone sets the
count.  A count set after a mesh of another size expects a new mesh next, and is refused where it is used if none
came.  Views are plain names; ``with flow.scope.mirrored_view():`` pushes one onto the stack read first.
"""
import contextlib
import os
import re

from . import env
from .errors import ConfigError

VIEWS = ("consistent", "mirrored")

_state = {
    "device_num": None,   # None: 1 device per process until asked otherwise
    "view": None,         # None: env FLOWLAYERS_VIEW or "consistent"
    "mesh": None,         # None: one axis "data" over all devices
    "layout_rules": {},
    "backend": None,      # None: env FLOWLAYERS_BACKEND, else the engine registry's default
    "seed": 0,
    "legacy_model_io": False,
    "nonfinite_inputs": False,    # NaN and infinity in float inputs and labels: refused unless allowed
    "dtype_policy": None,         # a mixed_precision.DTypePolicy; None: the float dtype in force
    "compilation_cache": None,    # a directory compiled programs are kept in; None: env FLOWLAYERS_COMPILATION_CACHE
}
_view_stack = []        # views of enclosing ``with`` view scopes, innermost last
_policy_stack = []      # dtype policies of job functions being built (enable_auto_mixed_precision), innermost last


def positive_int(value, what):
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise ConfigError(f"{what}: expected a positive int, received {value!r}; pass a count of at least 1")
    return value


@contextlib.contextmanager
def trial(key, value):
    """``key`` set to ``value`` for the block, and kept only if the block raises nothing."""
    before, _state[key] = _state[key], value
    try:
        yield
    except BaseException:
        _state[key] = before
        raise


# Devices and mesh ------------------------------------------------------------------------------------------------
def set_device_num(n):
    _state["device_num"] = n


def device_num_set():
    """The per-process count given by ``gpu_device_num``, or None."""
    return _state["device_num"]


def device_num():
    """The devices of all processes: the count set times the processes, else the size of the mesh set, else one
    per process."""
    if _state["device_num"]:
        return _state["device_num"] * env.process_count()
    return product(_state["mesh"]) if _state["mesh"] else env.process_count()


def mesh_devices_per_process(axes, what):
    """The devices each process gives a mesh ``{axis: size}`` (None for the default mesh), sizes checked."""
    for name, size in axes.items():
        positive_int(size, f"flow.config.set_mesh({name}=...)")
    processes = env.process_count()
    if axes and product(axes) % processes:
        raise ConfigError(f"{what}: expected a mesh whose device count is a multiple of the {processes} processes "
                          f"of this job (each holds as many of its devices), received {product(axes)} device(s)")
    return product(axes) // processes if axes else None


def check_mesh_fits_count(axes, what):
    """A mesh must fit the device count set before it (OneFlow's order: the count, then the mesh)."""
    processes = env.process_count()
    count = _state["device_num"] and device_num()
    if axes and count and product(axes) != count:
        raise ConfigError(f"{what}: expected the product of the axis sizes to equal the device count {count} "
                          f"already set (flow.config.gpu_device_num({_state['device_num']})"
                          f"{f' in each of {processes} processes' if processes > 1 else ''}), received a mesh of "
                          f"{product(axes)} device(s); set a mesh of {count} devices, or the device count first")


def set_mesh(axes):
    _state["mesh"] = dict(axes) or None


def product(mesh):
    total = 1
    for size in mesh.values():
        total *= size
    return total


def describe_mesh(mesh):
    return ", ".join(f"{k}={v}" for k, v in mesh.items())


def mesh_shape():
    """``{axis: size}`` in force: the one from ``set_mesh`` or ``{"data": device_num()}``."""
    mesh = _state["mesh"] or {"data": device_num()}
    if product(mesh) != device_num():     # a count set after a mesh for another count, and no mesh since
        raise ConfigError(
            f"flow.config.set_mesh({describe_mesh(mesh)}): expected the product of the axis sizes to equal the "
            f"device count {device_num()} (flow.config.gpu_device_num), received a mesh of {product(mesh)} "
            f"device(s); set a mesh of {device_num()} devices, or set_mesh() for one 'data' axis over all of them")
    return dict(mesh)


# Views -----------------------------------------------------------------------------------------------------------
def as_view_name(view, what="view"):
    """A view object (``flow.scope.<name>_view()``: its ``name``) or a view name -> the name; anything else is an
    error naming ``what``."""
    name = getattr(view, "name", view) if not isinstance(view, str) else view
    if isinstance(name, str) and name in VIEWS:
        return name
    raise ConfigError(f"{what}: expected one of {list(VIEWS)} (or flow.scope.<name>_view()), received {view!r}; "
                      f"use one of those names (FLOWLAYERS_VIEW takes the same)")


def set_view(name):
    _state["view"] = name


def explicit_view():
    """The view set by ``set_view`` or ``$FLOWLAYERS_VIEW``, or None where the default would be taken."""
    environ = os.environ.get("FLOWLAYERS_VIEW")
    return _state["view"] or (as_view_name(environ, "environment variable FLOWLAYERS_VIEW") if environ else None)


def view():
    """The view in force: a ``with`` scope, else ``set_view``, else ``$FLOWLAYERS_VIEW``, else consistent."""
    return (_view_stack[-1] if _view_stack else None) or explicit_view() or "consistent"


def push_view(name):
    """``name`` is the view in force until ``pop_view`` (a ``with`` view scope)."""
    _view_stack.append(name)


def pop_view():
    _view_stack.pop()


# Layout rules, backend, seed ---------------------------------------------------------------------------------------
def check_layout_rules(rules):
    if not isinstance(rules, dict):
        raise ConfigError(f"flow.config.set_layout_rules(rules): expected a dict regex -> spec, received "
                          f"{type(rules).__name__}")
    for pattern, spec in rules.items():
        try:
            re.compile(pattern)
        except (re.error, TypeError) as e:
            raise ConfigError(f"layout rule {pattern!r}: expected a regular expression, received one that fails: {e}; "
                              f"escape characters meant literally with a backslash, e.g. r'dense\\(1\\)'") from None
        if not isinstance(spec, (tuple, list)) or not all(a is None or isinstance(a, str) for a in spec):
            raise ConfigError(f"layout rule {pattern!r}: expected a tuple of mesh-axis names or None, one per "
                              f"tensor dim, received {spec!r}; write e.g. (None, 'model') to split a kernel's columns")
    return {p: tuple(s) for p, s in rules.items()}


def set_layout_rules(rules):
    _state["layout_rules"] = check_layout_rules(rules)


def layout_rules():
    return dict(_state["layout_rules"])


def set_backend(name):
    _state["backend"] = name


def backend_set():
    """The backend named by ``set_backend`` or ``$FLOWLAYERS_BACKEND``, or None: the registry's default."""
    return _state["backend"] or os.environ.get("FLOWLAYERS_BACKEND") or None


def set_seed(seed):
    if isinstance(seed, bool) or not isinstance(seed, int):
        raise ConfigError(f"flow.config.set_seed(seed): expected an int, received {seed!r}")
    _state["seed"] = seed


def seed():
    return _state["seed"]


def set_compilation_cache(directory):
    _state["compilation_cache"] = directory


def compilation_cache():
    """The directory set by ``set_compilation_cache`` or ``$FLOWLAYERS_COMPILATION_CACHE`` ("" in either: off), or
    None."""
    given = _state["compilation_cache"]
    given = os.environ.get("FLOWLAYERS_COMPILATION_CACHE") if given is None else given
    return os.path.expanduser(given) if given else None


def set_legacy_model_io(val):
    if not isinstance(val, bool):
        raise ConfigError(f"flow.config.enable_legacy_model_io(val): expected True or False, received {val!r}")
    _state["legacy_model_io"] = val


def legacy_model_io_enabled():
    return _state["legacy_model_io"]


def set_nonfinite_inputs(val):
    if not isinstance(val, bool):
        raise ConfigError(f"flow.config.allow_nonfinite_inputs(val): expected True or False, received {val!r}")
    _state["nonfinite_inputs"] = val


def nonfinite_inputs_allowed():
    return _state["nonfinite_inputs"]


# Dtype policies ----------------------------------------------------------------------------------------------------
def set_dtype_policy(policy):
    """The global dtype policy (checked by ``flow.mixed_precision``); None: back to the default."""
    _state["dtype_policy"] = policy


def dtype_policy():
    return _state["dtype_policy"]


def push_dtype_policy(policy):
    """``policy`` is what layers made take until ``pop_dtype_policy`` (a job function's build)."""
    _policy_stack.append(policy)


def pop_dtype_policy():
    _policy_stack.pop()


def scoped_dtype_policy():
    return _policy_stack[-1] if _policy_stack else None


def reset():
    """Every setting back to its default (a test's fresh start)."""
    _state.update(device_num=None, view=None, mesh=None, layout_rules={}, backend=None, seed=0,
                  legacy_model_io=False, nonfinite_inputs=False, dtype_policy=None, compilation_cache=None)
