"""Variables: logical state with a path (``dense_1/kernel``); the engine holds the values.

A Variable is a spec (path, shape, dtype, initializer, layout) and the place its value lives: at most one
runtime at a time (a view, device count and mesh), in one layout.  Running under another placement moves the
value there (``handle_in``), so a model keeps its weights when the view is switched.  A backend sees only the
``VariableSpec`` it is handed and the handles it made.
"""
import hashlib
import re
import weakref

import numpy as np

from .. import distribute, engine
from ..contract import VariableSpec
from ..errors import DTypeError, InputError, SBPError, ShapeError, describe_shape
from ..ops import source
from ..sbp import Split, broadcast
from .graph import current_placement, register_tensor_like


_live = weakref.WeakSet()   # every Variable still referenced: what layout rules may match
_moves = [0]                # how many times any variable's value has moved or been dropped


def live_variables():
    return sorted(_live, key=lambda v: v.path)


def moves():
    """A number that changes whenever any variable's value moves or is dropped: while it stays, every handle a
    step was given is still where its variable lives (a step's check in O(1) instead of one per variable)."""
    return _moves[0]


class Variable:
    def __init__(self, path, shape, dtype, initializer, trainable=True):
        self.path, self.shape, self.dtype = path, tuple(int(d) for d in shape), dtype
        self.initializer, self._trainable = initializer, trainable
        self.frozen = False     # set by its layer's (or model's) trainable = False, as Keras freezes
        self._home = None       # (runtime, nd-SBP, engine handle) where the value lives, once it lives somewhere
        self.layout_of = None   # another Variable whose layout this one follows (optimizer slots)
        self.distribute = None  # OneFlow's per-variable layout (flow.distribute.split(k)); wins over layout rules
        self.regularizer = None     # a flow.regularizers.* penalty added to the loss while this variable trains
        self.random_seed = None     # OneFlow's get_variable(random_seed=...): draws its initial value instead
        self._placement = current_placement()  # devices of a flow.scope.placement on a subset (whole on each)
        _live.add(self)

    @property
    def name(self):
        return self.path

    @property
    def placement(self):
        """The devices of the placement this variable was made in, or None (all): an optimizer slot is where
        its variable is."""
        return self.layout_of.placement if self.layout_of is not None else self._placement

    @property
    def trainable(self):
        """Declared trainable (moving statistics are not) and not frozen by its layer."""
        return self._trainable and not self.frozen

    @trainable.setter
    def trainable(self, value):
        self._trainable = bool(value)

    def seed(self, global_seed):
        """Two int32 seeds from the global seed and the path: the same draw in every view and device count."""
        seed = global_seed if self.random_seed is None else f"own {self.random_seed}"
        digest = hashlib.sha256(f"{seed}:{self.path}".encode()).digest()
        return [int.from_bytes(digest[i:i + 4], "little") & 0x7FFFFFFF for i in (0, 4)]

    # Layouts ------------------------------------------------------------
    def mesh_spec(self, mesh, rules):
        """Mesh-axis name (or None) per tensor dim, from the first matching layout rule of ``rules``
        (``{regex: spec}``).  ``mesh`` is ``{axis: size}`` (sizes are checked) or a list of axis names.
        """
        if self.layout_of is not None:
            return self.layout_of.mesh_spec(mesh, rules)
        if self.placement is not None:
            return self._placed_spec(rules)
        if self.distribute is not None and self.distribute.axis is not None:
            what = f"variable {self.path!r} ({self.distribute!r})"
            if not 0 <= self.distribute.axis < len(self.shape):
                raise SBPError(f"{what}: expected a split axis in [0, {len(self.shape)}) for shape "
                               f"{describe_shape(self.shape)}, received {self.distribute.axis}")
            spec = [None] * len(self.shape)
            spec[self.distribute.axis] = distribute.mesh_axis(mesh, what)
            check_spec(repr(self.distribute), tuple(spec), self, mesh)
            return tuple(spec)
        for pattern, spec in rules.items():
            if re.search(pattern, self.path):
                check_spec(pattern, spec, self, mesh)
                return spec
        return (None,) * len(self.shape)

    def _placed_spec(self, rules):
        """A variable of a placement on some devices is whole on each of them: a split asked for it is refused."""
        asked = [repr(self.distribute)] if self.distribute is not None and self.distribute.axis is not None else []
        asked += [repr(p) for p in rules if re.search(p, self.path)]
        if asked:
            raise SBPError(f"variable {self.path!r}: placed on devices {list(self.placement)} "
                           f"(flow.scope.placement), expected no split, received {asked[0]}; a variable of a "
                           f"placement on some of the devices is whole on each of them, so drop the split or the "
                           f"placement")
        return (None,) * len(self.shape)

    def nd_sbp(self, mesh, rules):
        spec = self.mesh_spec(mesh, rules)
        return tuple(Split(spec.index(a)) if a in spec else broadcast for a in mesh)

    def layout(self, placement):
        """This variable's nd-SBP on ``placement``'s mesh (consistent view), from its layout; None in the mirrored
        view, where every replica holds it whole."""
        return self.nd_sbp(dict(placement.mesh), placement.rules()) if placement.consistent else None

    def spec(self, placement, nd_sbp):
        """What a backend is handed to make this variable in ``placement``, laid out as ``nd_sbp``."""
        return VariableSpec(self.path, self.shape, self.dtype, self.trainable, self.initializer.sampler(self.shape),
                            tuple(self.seed(placement.seed)), nd_sbp, self.placement)

    # Values -------------------------------------------------------------
    def handle_in(self, runtime, placement):
        """This variable's engine handle in ``runtime``, laid out as ``placement`` says; a value living in another
        runtime or layout (a view switch, new layout rules) moves here, and one living nowhere is drawn."""
        layout = self.layout(placement)
        home = self._home
        if home is None or home[0] is not runtime or home[1] != layout:
            value = home[0].read(home[2]) if home is not None else self._host_value(placement)
            self._move((runtime, layout, runtime.create_variable(self.spec(placement, layout), value)))
        return self._home[2]

    def _host_value(self, placement):
        """The initial value an initializer makes on the host (``Orthogonal``), in this variable's dtype; None
        where the backend draws it."""
        value = self.initializer.host_value(self.shape, self.seed(placement.seed))
        return None if value is None else np.asarray(value, self.dtype.numpy)

    @property
    def location(self):
        """``(runtime, engine handle)`` where the value lives, or None before it lives anywhere."""
        return self._home and self._home[::2]

    def forget(self):
        """Drop the value: the next step draws it again from the initializer."""
        self._move(None)

    def _move(self, home):
        self._home = home
        _moves[0] += 1

    def _held(self):
        """(runtime, handle), drawing the value in the placement in force if it lives nowhere yet: a Variable read
        or written by the user (``numpy``, ``assign``) is an entry point, and takes the settings in force as a
        ``fit`` does."""
        if self._home is None:
            placement = engine.placement()
            self.handle_in(engine.runtime(placement), placement)
        return self.location

    def numpy(self):
        """The full logical value as a numpy array (gathered from every device)."""
        runtime, handle = self._held()
        return runtime.read(handle)

    def assign(self, value):
        """Set the full logical value; the engine reshards it to this variable's layout."""
        value = self.checked(value)
        runtime, handle = self._held()
        runtime.write(handle, value)

    def checked(self, value):
        """``value`` as this variable takes it: its shape, and its dtype (numbers of the same kind are cast)."""
        value = np.asarray(value)
        if value.shape != self.shape:
            raise ShapeError(f"variable {self.path!r}: expected a value of shape {describe_shape(self.shape)}, "
                             f"received {describe_shape(value.shape)}")
        if value.dtype != self.dtype.numpy and (value.dtype.kind not in "fiub"     # numpy's kind of bfloat16 is "V"
                                                or (value.dtype.kind == "f") != self.dtype.is_floating):
            raise DTypeError(f"variable {self.path!r}: expected a value of dtype {self.dtype.name}, received "
                             f"{value.dtype}")
        return value.astype(self.dtype.numpy)

    def __repr__(self):
        return f"Variable({self.path!r}, shape={describe_shape(self.shape)}, dtype={self.dtype.name})"

    # A weight is a tensor (Keras' ``ops.matmul(x, self.kernel)``, ``inputs * self.w``): in any op, layer call or
    # operator it stands for the Blob reading it in the graph being built, as ``Layer.read(var)`` gives it.
    __array_ufunc__ = None      # numpy defers to the reflected operator: ``array * var`` is ``var.__rmul__``

    @property
    def ndim(self):
        return len(self.shape)

    @property
    def value(self):
        """The Blob reading this variable in the graph being built (``Layer.read``; Keras' ``variable.value``)."""
        return source.variable(self)


def _through_read(name):
    def operator(self, *other):
        return getattr(self.value, name)(*other)
    operator.__name__ = name
    return operator


for _name in ("add", "radd", "sub", "rsub", "mul", "rmul", "truediv", "rtruediv", "matmul", "neg"):
    setattr(Variable, f"__{_name}__", _through_read(f"__{_name}__"))
register_tensor_like(Variable, source.variable)


def assign_all(variables, values, owner):
    """Set many variables at once, all-or-nothing: every value is checked before any is written."""
    values = list(values)
    if len(values) != len(variables):
        raise InputError(f"{owner}.set_weights: expected {len(variables)} arrays "
                         f"({', '.join(v.path for v in variables)}), received {len(values)}")
    arrays = []
    for var, value in zip(variables, values):
        value = np.asarray(value)
        if value.shape != var.shape:
            raise InputError(f"{owner}.set_weights: variable {var.path!r} expected shape {describe_shape(var.shape)}, "
                             f"received {describe_shape(value.shape)}")
        arrays.append(value)
    for var, value in zip(variables, arrays):
        var.assign(value)


def check_rules(placement, variables, others=()):
    """Every layout rule of ``placement`` must fit each of ``variables`` it matches and match one of them or of
    ``others`` (live variables of other models: a rule may be meant for another model).  Runs before anything
    moves."""
    if not placement.consistent:
        return
    mesh, rules = dict(placement.mesh), placement.rules()
    variables = [v for v in variables if v.layout_of is None]
    for v in variables:
        v.mesh_spec(mesh, rules)
    candidates = variables + [v for v in others if v.layout_of is None]
    for pattern in rules:
        if not any(re.search(pattern, v.path) for v in candidates):
            paths = sorted({v.path for v in variables})
            raise SBPError(f"layout rule {pattern!r}: expected to match at least one variable, received none "
                           f"among {paths[:8]}{' ...' if len(paths) > 8 else ''} (rules match variable paths "
                           f"with re.search); fix the pattern or remove the rule")


def check_spec(pattern, spec, var, mesh):
    """A layout rule's spec must fit the variable it matched: one entry per dim, known axes, each used once,
    and (given axis sizes) splits that divide the dim."""
    where = f"layout rule {pattern!r} (matched variable {var.path!r} of shape {describe_shape(var.shape)})"
    if len(spec) != len(var.shape):
        raise SBPError(f"{where}: expected {len(var.shape)} entries, one per tensor dim, received {spec!r}; give "
                       f"each dim a mesh-axis name or None")
    named = [a for a in spec if a is not None]
    for a in named:
        if a not in mesh:
            raise SBPError(f"{where}: expected mesh axes among {list(mesh)}, received unknown axis {a!r}; "
                           f"name an axis of flow.config.set_mesh(...) or None")
    if len(set(named)) != len(named):
        twice = next(a for a in named if named.count(a) > 1)
        raise SBPError(f"{where}: expected each mesh axis on at most one tensor dim, received {spec!r} which puts "
                       f"axis {twice!r} on two dims; keep {twice!r} on one dim and put None (or another axis) on "
                       f"the others")
    if isinstance(mesh, dict):
        for dim, a in enumerate(spec):
            if a is not None and var.shape[dim] % mesh[a]:
                raise SBPError(f"{where}: splitting dim {dim} of size {var.shape[dim]} over mesh axis {a!r} of size "
                               f"{mesh[a]} expected a size that divides by {mesh[a]}; choose another dim or axis, "
                               f"or leave this variable replicated")


class VariableStore:
    """Variables by path for the job-function face, where layers find their weights by name (OneFlow's get_variable)."""

    def __init__(self):
        self.variables = {}

    def get(self, path, shape, dtype, initializer, trainable=True, distribute=None):
        var = self.variables.get(path)
        if var is None:
            var = self.variables[path] = Variable(path, shape, dtype, initializer, trainable)
            var.distribute = distribute
        elif var.shape != tuple(shape) or var.dtype != dtype:
            raise ShapeError(f"variable {path!r}: exists with shape {describe_shape(var.shape)} {var.dtype.name}, "
                             f"requested again with shape {describe_shape(tuple(shape))} {dtype.name}; give the "
                             f"layer another name to create a new variable")
        return var


store = VariableStore()
