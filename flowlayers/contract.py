"""The backend contract: what an engine plugin supplies, and everything it is handed, as typed protocols.

A backend is found through the entry-point group ``flowlayers.backends`` (its entry point names a class that
satisfies ``Backend``).  It imports from flowlayers only this module, ``flowlayers.errors`` and ``flowlayers.sbp``;
everything else reaches it as arguments: a ``Placement``'s values (view, device count, mesh, seed), a
``VariableSpec`` per variable, the ``Program`` to compile with its plan, and the engine handles of each step's
variables.  ``docs/backends.md`` walks through it; ``check_backend`` states what a test can check of any backend.

The front end owns what is not the engine's: settings, layout rules, the planner, where each variable's value
lives (moving it between runtimes when the view changes), optimizer rules, checkpoints.  A backend owns values on
devices, compiled steps, and the communication its plan asks for.
"""
from dataclasses import dataclass
from typing import Any, Callable, List, Mapping, Optional, Protocol, Sequence, Tuple, runtime_checkable

import numpy as np

from .errors import ConfigError
from .framework.cluster import Cluster
from .framework.placement import Placement
from .framework.program import Program
from .framework.variable import VariableSpec
from .optimizers import functional      # optimizer rules for engines without in-place update
from .parallel.plan import Boxing, Plan

Handle = Any            # the engine's own variable object, opaque to the front end
Axes = List[Tuple[str, int]]

__all__ = ["Backend", "Runtime", "Executable", "Kernel", "KernelContext", "ArrayNamespace", "Handle", "Placement",
           "Program", "VariableSpec", "Cluster", "Plan", "Boxing", "Rows", "Pending", "read_all", "total",
           "functional", "op_names", "check_backend", "run_steps", "step_by_step", "add_kernel", "micro_batches"]


@runtime_checkable
class Backend(Protocol):
    name: str
    views: Tuple[str, ...]      # the views it runs: "consistent", "mirrored" (declared, not discovered)
    kernels: Mapping[str, "Kernel"]     # op name -> kernel, for every op of ``op_names()`` and custom ones
    # optional: supports(op_name, signature) -> bool, the SBP signatures the engine can realise (consistent view);
    # the planner offers only those, here and in Blob.sbp, summary() and parallel_plan()
    # optional: splits_dim_over_several_axes = True where one tensor dim may be split over several mesh axes
    # (nd-SBP (S(0), S(0)); JAX's PartitionSpec(("a", "b"))); absent or False: one axis per dim at most

    # optional: processes = True where it runs one program over the processes of a launched job; ``runtime`` is
    # then also called with ``cluster=`` (below), and ``join(view, device_num, cluster)``, if present, as soon as
    # the process's device count is set (``view``: the view set explicitly, else None), so that the backend can join
    # its engine's distributed runtime before user code starts the engine

    def runtime(self, view: str, device_num: int, mesh: Optional[Tuple[Tuple[str, int], ...]]) -> "Runtime":
        """A runtime for one view, device count and (consistent view) mesh ``((axis, size), ...)``; made once per
        distinct tuple and reused.  A one-device consistent runtime keeps the mesh's axis names, each of size 1.

        Several processes (``cluster=Cluster(...)``, only to a backend declaring ``processes = True``): every process
        of the job makes the same calls in the same order.  ``device_num`` counts the devices of all processes;
        process ``p`` owns global devices ``p * local .. (p + 1) * local - 1`` (``cluster.local(device_num)``), and
        the mesh lists devices in that order.  The backend joins its engine's own distributed runtime (once per
        process, on ``cluster.coordinator`` / ``cluster.addresses``).  Every host value handed to the runtime or an
        executable (variable values, feeds) is the whole logical value, the same in every process: each process puts
        only its own devices' blocks on them.  Every value returned (``read``, outputs, sums) is the whole logical
        value, in every process.  Such a runtime also has ``barrier(name)``: return once every process reached it; and
        ``gather(array)``: every process's host array (the same shape in each) joined along dim 0 in process order,
        returned in every process (per-process datasets feed their shares of a batch this way)."""

    def check_device_count(self, n: int, what: str) -> None:
        """Raise ``flow.ConfigError`` naming ``what`` if ``n`` devices cannot be had in this process.  Called by
        ``flow.config.gpu_device_num``/``set_mesh``: it must not start the engine (it may reserve devices)."""


@runtime_checkable
class Runtime(Protocol):
    view: str                   # "consistent" | "mirrored"
    axes: Axes                  # consistent: the mesh; mirrored: [("replica", n)]
    num_replicas: int           # devices

    def create_variable(self, spec: VariableSpec, value: Optional[Any] = None) -> Handle:
        """A variable laid out as ``spec.nd_sbp`` on ``spec.devices`` (None: all), holding the whole logical
        ``value`` (numpy) resharded, or, without one, drawn from ``spec.sampler`` with ``spec.seed``: the same
        numbers in every view, device count and mesh."""

    def read(self, handle: Handle) -> Any:
        """The whole logical value as a numpy array, gathered from the devices."""

    def write(self, handle: Handle, value: Any) -> None:
        """Set the whole logical value (numpy, the variable's shape and dtype), resharded to its layout."""

    def shard_shapes(self, handle: Handle) -> List[Tuple[int, ...]]:
        """The shape each holding device really holds, read from the engine (``parallel_plan``)."""

    def holders(self, handle: Handle) -> List[int]:
        """Indices of the devices holding the variable."""

    def compile(self, program: Program, plan: Optional[Callable[[Optional[int]], Plan]], seed: int) -> "Executable":
        """An executable for ``program``.  ``plan(batch)`` (consistent view; None in the mirrored view) is the
        front end's Plan for a fed batch size, made once per size; ``seed`` is the global seed dropout draws with.
        """


@runtime_checkable
class Executable(Protocol):
    program: Program

    def __call__(self, feeds: Sequence[Any], handles: Mapping[str, Handle], lr: float = 0.0,
                 step: int = 1) -> List[Any]:
        """Run one step: ``feeds`` one numpy array (a ``list`` input: one per device) per ``program.inputs``;
        ``handles`` the engine handle of every variable and optimizer slot by path (the same mapping object while
        nothing moved; a new one after a value moved, and then traced steps holding the old ones are stale).
        Returns one host value per output in ``program.output_modes``, then the watched gradients
        (``program.gradients``) as logical arrays.  A ``"sum"`` output may instead be a ``Pending`` holding the
        engine's value, read only when the front end needs it: an engine that dispatches asynchronously then runs
        ahead of the host.  Optional: ``steps(feeds, handles, lrs, first_step)``, several steps in one dispatch
        (``run_steps``); ``takes_rows(rows, sources)``, true where one step of ``rows`` rows of the whole training
        arrays ``sources`` runs faster through ``steps`` with ``Rows`` (the arrays kept on the devices) than fed
        them (``fit`` then does so); ``compiled_text(feeds, handles, lr, step)``, the program the engine compiles
        for such a step, as text, compiled and not run (``parallel_plan().compiled_program()``)."""


class KernelContext(Protocol):
    """What a kernel may ask of the step it runs in."""
    phase: str

    def training(self, flag: Optional[bool]) -> bool: ...
    def random_uniform(self, shape, op_name: str, op_seed=None): ...    # keyed by (seed, op, step, replica)
    def constant(self, value, dtype): ...
    def input_sbp(self, node, i: int) -> Optional[Tuple]: ...          # the nd-SBP input i arrives in
    def splits(self, node, i: int, dim: int) -> bool: ...
    def lay_out(self, tensor, nd_sbp): ...                               # a kernel's own intermediate
    def pin(self, blob, tensor): ...
    def box(self, node, i: int, tensor): ...


@dataclass(frozen=True, eq=False)
class Rows:
    """Several steps' feed of one input as rows of a whole host array: step ``k`` takes ``source[index[k]]``.

    ``source`` is the same object in every call while the data stays the same (a training array, for the whole of
    ``fit``), so an engine may keep it on its devices once and gather each step's rows there, where the host would
    otherwise copy every batch.  ``gather()`` is the host's way.

    Where the steps' rows are consecutive in an epoch's order (``fit``'s batches), ``start`` says so: ``index`` is
    ``order[start:start + index.size]`` in steps of ``index.shape[1]`` rows (``order`` None: the rows in their
    order), so an engine that keeps ``order`` on its devices can make ``index`` there from ``start`` alone."""
    source: Any
    index: Any          # int array (steps, batch)
    order: Any = None   # the epoch's row order (an int array over all rows), None: the rows in their order
    start: Optional[int] = None     # the first step's first row in ``order``; None: ``index`` is not such a run

    def gather(self):
        return np.take(self.source, self.index, axis=0)


class Pending:
    """A ``"sum"`` output still on the engine's devices (``Executable.__call__``): ``value`` what the engine needs to
    read it, ``reader`` the engine's object that reads such values: ``reader.read(values)``, their host arrays, read
    together (one wait, the transfers overlapped: a GPU read one at a time waits a round trip each); optionally
    ``reader.total(values)``, the float64 sum of all their elements, where the engine can add them up with fewer
    reads.  ``np.asarray`` and ``float`` read one alone; ``read_all`` and ``total`` many at once."""
    __slots__ = ("value", "reader")

    def __init__(self, value, reader):
        self.value, self.reader = value, reader

    def __array__(self, dtype=None, copy=None):
        if copy is False:       # NumPy 2's protocol: copy=False must not copy, and a read from the devices does
            raise ValueError("a Pending sum is still on the engine's devices: reading it into a host array copies "
                             "it, so np.asarray(..., copy=False) cannot be honoured; leave copy as None or True")
        return np.asarray(self.reader.read([self.value])[0], dtype=dtype)

    def __float__(self):
        return float(self.__array__())


def read_all(values):
    """The host arrays of ``values``: the ``Pending`` ones read together, one ``read`` per engine reader."""
    values = list(values)
    for reader, ks in _by_reader(values).items():
        for k, host in zip(ks, reader.read([values[k].value for k in ks])):
            values[k] = host
    return [np.asarray(v) for v in values]


def total(values):
    """The float64 sum of every element of ``values`` (scalars or arrays, some maybe ``Pending``): each engine
    reader's values summed by its ``total`` where it has one, else read together and summed on the host."""
    values, result = list(values), 0.0
    for reader, ks in _by_reader(values).items():
        if hasattr(reader, "total"):
            result += float(reader.total([values[k].value for k in ks]))
            for k in ks:
                values[k] = None
    return result + sum(float(np.sum(np.asarray(v, np.float64))) for v in read_all(v for v in values
                                                                                     if v is not None))


def _by_reader(values):
    """``{reader: [index of each Pending value it reads]}``, in order."""
    groups = {}
    for k, v in enumerate(values):
        if isinstance(v, Pending):
            groups.setdefault(v.reader, []).append(k)
    return groups


def run_steps(executable, feeds, handles, lrs, first_step):
    """``len(lrs)`` steps of ``executable`` in a row, at rates ``lrs`` and steps ``first_step, first_step + 1, ...``;
    ``feeds``: per input, a ``Rows`` or an array stacked over the steps.  Returns per output the values of every
    step stacked.  An executable may do it in one dispatch (``Executable.steps``, optional, the same arguments);
    otherwise the steps are called one by one."""
    if hasattr(executable, "steps"):
        return executable.steps(feeds, handles, lrs, first_step)
    return step_by_step(executable, feeds, handles, lrs, first_step)


def micro_batches(feeds, n):
    """Host feeds -> ``n`` lists of feeds, each a run of consecutive rows (sizes differ by one at most); a batch of
    fewer rows runs as one micro-batch per row (the sum of the gradients is the same)."""
    if n == 1 or not feeds or not np.ndim(feeds[0]):
        return [list(feeds)]
    n = min(n, len(feeds[0]))
    return [list(chunk) for chunk in zip(*[np.array_split(np.asarray(f), n) for f in feeds])]


def step_by_step(executable, feeds, handles, lrs, first_step):
    """``run_steps`` as one call of ``executable`` per step (what an executable's ``steps`` may fall back to)."""
    stacked = [f.gather() if isinstance(f, Rows) else f for f in feeds]
    per_step = [executable([f[k] for f in stacked], handles, lr, first_step + k) for k, lr in enumerate(lrs)]
    return [np.stack(read_all(values)) for values in zip(*per_step)]


class Kernel(Protocol):
    """Lowers one node (``node.op.name``, ``node.attrs``) to engine ops: returns its output, or a tuple."""

    def __call__(self, node, *inputs, ctx: KernelContext): ...


class ArrayNamespace(Protocol):
    """What optimizer rules compute with (``Optimizer.apply_gradient(xp, ...)``).

    Variables and slots reach a rule as references: reading one (arithmetic on it) reads its current value, and
    ``assign(ref, value)`` replaces it.  An engine that updates in place passes its variables; one that cannot (a
    functional engine) passes ``flowlayers.optimizers.functional.Ref`` boxes and takes their final values (see
    ``FunctionalMath``).  Optional whole-rule kernels: ``apply_sgd``, ``apply_adam`` (``Optimizer.update``)."""

    def sqrt(self, x): ...
    def minimum(self, a, b): ...
    def maximum(self, a, b): ...
    def clip(self, x, lo, hi): ...
    def assign(self, ref, value) -> None: ...


def add_kernel(table, op_name, fn, replace=False):
    """Put ``fn`` into a backend's kernel ``table`` as the kernel of ``op_name`` (a backend's ``register_kernel``);
    a name that has another kernel is refused unless ``replace``."""
    if op_name in table and table[op_name] is not fn and not replace:
        raise ConfigError(f"register_kernel({op_name!r}): expected a new op name, received one that already has a "
                          f"kernel ({table[op_name].__module__}.{table[op_name].__qualname__}); name the op "
                          f"differently, or pass replace=True to override it")
    table[op_name] = fn
    return fn


def op_names():
    """The names of every op the front end builds (``flowlayers/ops``): what a backend's kernel table covers,
    besides custom ops registered by users."""
    from . import ops

    return sorted(name for name, op in ops.by_name().items() if op.kind in ("compute", "constant", "constraint"))


def check_backend(backend, kernels=None):
    """What any backend must show without running a model: the protocol's members, views the front end knows, and a
    kernel for every front-end op in ``kernels`` (default: its own table).  Returns a list of what is missing."""
    missing = [f"Backend.{m}" for m in ("name", "views", "kernels", "runtime", "check_device_count")
               if not hasattr(backend, m)]
    missing += [f"view {v!r}" for v in getattr(backend, "views", ()) if v not in ("consistent", "mirrored")]
    kernels = getattr(backend, "kernels", {}) if kernels is None else kernels
    return missing + [f"kernel {name!r}" for name in op_names() if name not in kernels]
