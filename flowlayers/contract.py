"""The backend contract: what an engine plugin supplies, and everything it is handed, as types.

This module is a leaf of the house: protocols and plain data only, importing nothing of flowlayers but ``errors``,
``sbp`` and ``dtypes``.  A backend is found through the entry-point group ``flowlayers.backends`` (its entry point
names a class that satisfies ``Backend``).  It imports from flowlayers only this module, ``flowlayers.errors``,
``flowlayers.sbp`` and ``flowlayers.backend_common`` (what every backend needs, written once); everything else
reaches it as arguments: a ``Placement``'s values (view, device count, mesh, seed), a ``VariableSpec`` per variable,
the ``Program`` to compile with its ``Plan``, and the engine handles of each step's variables.  ``docs/backends.md``
walks through it, and a test holds that page to this module.

The front end owns what is not the engine's: settings, layout rules, the planner, where each variable's value
lives (moving it between runtimes when the view changes), optimizer rules, checkpoints.  A backend owns values on
devices, compiled steps, and the communication its plan asks for.

What a backend can do is a ``Capabilities`` value its Backend class declares, readable without importing the
engine: the planner, ``model.summary()``, ``parallel_plan()`` and ``repr(blob)`` work where only numpy is installed.
Optional behaviour is a flag there, never a member probed for.
"""
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, List, Mapping, Optional, Protocol, Sequence, Tuple, runtime_checkable

import numpy as np

from .sbp import Signature

Handle = Any            # the engine's own variable object, opaque to the front end
Axes = List[Tuple[str, int]]

__all__ = ["Backend", "Capabilities", "Runtime", "Executable", "PendingReader", "Kernel", "KernelContext",
           "ArrayNamespace", "OptimizerRules", "Node", "Blob", "Handle", "Cluster", "Placement", "VariableSpec",
           "Program", "Plan", "Boxing", "Rows", "ExportSpec", "Pending", "read_all", "total"]


# Plain data handed down ------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Cluster:
    """This process's place among the processes of one job (``flow.env``; None where there is one process).

    Devices are numbered process by process: with ``count`` processes of ``local`` devices each, global device
    ``p * local + d`` is device ``d`` of process ``p``, and a mesh lists its devices in that order (row-major over
    its axes), so the leading mesh axis spans processes first."""
    index: int                  # this process, 0 .. count-1
    count: int                  # processes in the job
    coordinator: str            # "host:port": where engines with one coordination service meet (jax.distributed)
    addresses: Tuple[str, ...]  # "host:port" per process: engines with a server per process (TF's gRPC servers)
    hosts: Tuple[str, ...] = ("127.0.0.1",)

    def local(self, device_num):
        """The devices of one process, of ``device_num`` in all."""
        return device_num // self.count

    def owns(self, device, device_num):
        """Whether global device ``device`` (of ``device_num``) is one of this process's."""
        return device // self.local(device_num) == self.index


@dataclass(frozen=True)
class Placement:
    """Where and how a program runs, as one immutable value.

    ``flow.config`` holds settings a user may change at any time; what runs takes them once, as a Placement, when
    it is compiled or called, and hands that value down: to the planner, to the variables' layouts and seeds, and to
    the backend, which never reads ``flow.config``.  Two programs compiled under different settings hold different
    Placements, so a setting changed between them cannot reach one half-way."""
    backend: str              # the engine's entry-point name
    view: str                 # "consistent" | "mirrored"
    device_num: int           # devices of all processes
    mesh: Tuple = ()          # ((axis, size), ...): the consistent view's mesh; () in the mirrored view
    layout_rules: Tuple = ()  # ((regex, per-dim mesh axes), ...), in the order they were given
    seed: int = 0
    cluster: Optional[Cluster] = None   # the processes of a launched job; None: this process alone
    compilation_cache: Optional[str] = None     # where compiled programs are kept across processes; None: off

    @property
    def consistent(self):
        return self.view == "consistent"

    @property
    def axes(self):
        """The mesh as ``[(axis, size), ...]``; the mirrored view's replicas are one axis ``replica``."""
        return list(self.mesh) if self.consistent else [("replica", self.device_num)]

    @property
    def runtime_key(self):
        """What decides the runtime (devices and mesh); rules and seed are per program."""
        return self.backend, self.view, self.device_num, self.mesh, self.cluster

    def rules(self):
        return dict(self.layout_rules)


@dataclass(frozen=True)
class VariableSpec:
    """A variable as a backend receives it: everything it needs to make, draw and lay out the value."""
    path: str
    shape: Tuple
    dtype: object             # a flowlayers dtype (``.name``, ``.numpy``)
    trainable: bool
    sampler: Tuple            # the initializer's (kind, params): "constant", "uniform", "normal", "truncated_normal"
    seed: Tuple               # two int32 seeds: the same draw in every view, device count and mesh
    nd_sbp: Optional[Tuple]   # one SBP per mesh axis (consistent view), or None (whole on every replica)
    devices: Optional[Tuple]  # the device indices of a placement on some devices, or None (all)


@dataclass(frozen=True)
class Capabilities:
    """What a backend can do, declared as a value its Backend class holds without importing its engine.

    The planner asks ``supports`` and ``splits_dim_over_several_axes``; the front end asks the flags instead of
    probing an engine's objects for members."""
    engine: str                         # the engine's top-level module ("tensorflow", "jax"): importable where it runs
    views: Tuple[str, ...] = ("consistent", "mirrored")
    # the SBP signatures the engine can realise (consistent view), ``supports(op_name, signature) -> bool``; None:
    # every signature.  The planner offers only those, here and in Blob.sbp, summary() and parallel_plan().
    supports: Optional[Callable[[str, Signature], bool]] = None
    splits_dim_over_several_axes: bool = False  # one tensor dim split over several mesh axes ((S(0), S(0)))
    processes: bool = False             # one program over the processes of a launched job (``Backend.join``)
    several_steps: bool = False         # ``Executable.steps``: several steps in one dispatch
    takes_rows: bool = False            # ``Executable.takes_rows``: steps may gather their rows on the devices
    shows_program: bool = False         # ``Executable.compiled_text``: the program the engine compiles, as text
    # the artifact formats ``Backend.export`` writes and ``Backend.load_export`` reads ("tf_saved_model", "jax")
    exports: Tuple[str, ...] = ()
    caches_compilations: bool = False   # ``Backend.cache_compilations``: compiled programs kept on disk


class Node(Protocol):
    """One op of the logical graph, as a backend reads it."""
    op: Any                     # the OpDef: ``.name`` (the kernel's key) and ``.kind``
    inputs: Tuple["Blob", ...]
    outputs: Tuple["Blob", ...]
    attrs: Mapping[str, Any]    # the op's own parameters (what its kernel reads)
    name: str                   # unique in the graph (errors name it)
    placement: Optional[Tuple[int, ...]]    # devices of a placement on some devices, or None: all
    recompute: Optional[int]    # the recomputed segment it belongs to (flow.recompute), or None
    variable: Any               # a variable op's variable: ``.path`` keys its handle
    layer: Any                  # the layer that made it, or None (errors name it by ``.name``)


class Blob(Protocol):
    """One logical tensor of the graph: hashable, known by shape and dtype."""
    node: Node
    index: int
    shape: Tuple
    dtype: Any                  # a flowlayers dtype (``.name``, ``.numpy``, ``.is_floating``)


class OptimizerRules(Protocol):
    """What a training step asks of ``Program.optimizer`` (a ``flow.optimizers`` object)."""
    gradient_accumulation_steps: Optional[int]

    checks_finite: bool               # the rule takes ``finite``: whether every gradient of the step is finite

    def is_update_step(self, step: int) -> bool: ...
    def clipping_norms(self, xp: "ArrayNamespace", squared): ...
    def decays(self, var) -> bool: ...
    def apply_gradient(self, xp, var, grad, slots, lr, step, update=True, decays=True, norm=None) -> None: ...
    def apply_all(self, xp, variables, refs, grads, slots, lr, step, update=True, norms=None, state=(),
                  finite=None) -> None: ...
    def loss_scale(self, state): ...  # the loss's factor before gradients, from ``Program.state``'s values, or None


@dataclass(frozen=True, eq=False)
class Program:
    """What a backend compiles: a graph from placeholders to outputs, a phase, and optionally a loss to minimise
    with an optimizer (built by ``flowlayers.framework.program.build``, which checks it).

    Output modes say how a value comes back to the host: ``numpy``, the logical value (mirrored view: replicas'
    rows concatenated; a scalar is the mean of the replicas' scalars); ``list``, one array per device (mirrored
    view); ``sum``, the sum of all elements over the whole logical batch (exact in every view: losses, metrics)."""
    inputs: Tuple[Blob, ...]
    outputs: Tuple[Blob, ...]
    output_modes: Tuple[str, ...]
    phase: str                        # train | eval | predict: decides dropout and batch-norm behaviour
    loss: Optional[Blob]
    optimizer: Optional[OptimizerRules]
    jit_compile: bool
    name: str
    gradients: Tuple[Blob, ...]       # Blobs whose gradient of the mean loss the step also returns (watch_diff)
    micro_batches: int                # a training batch split into this many, gradients summed, one update
    nodes: Tuple[Node, ...]           # producers first
    units: Tuple                      # the nodes in order, each flow.recompute segment gathered in one list
    variables: Tuple                  # the variables the nodes read (``.path``, ``.trainable``, ``.dtype``)
    updates: Tuple                    # (variable, Blob): state a training step assigns (moving statistics)
    slots: Mapping[str, Tuple]        # variable path -> its optimizer slot variables, in the rule's order
    state: Tuple = ()                 # the optimizer's own state variables (scalars: a loss scale), updated per step
    trained: Optional[Tuple] = None   # the variables the optimizer trains (None: every trainable one read)

    @property
    def results(self):
        """The Blobs a step hands on: outputs, loss, state updates and watched Blobs."""
        return list(self.outputs) + [b for b in [self.loss] if b is not None] + [b for _, b in self.updates] + \
            list(self.gradients)

    @property
    def trainable(self):
        """The variables a train step updates: ``trained`` where given (a stage of a custom train_step), else every
        trainable variable read; none without a loss."""
        if self.loss is None:
            return []
        return list(self.trained) if self.trained is not None else [v for v in self.variables if v.trainable]

    @property
    def returned_modes(self):
        """How each value a step returns comes back: the outputs' modes, then the watched gradients (logical)."""
        return list(self.output_modes) + ["numpy"] * len(self.gradients)


@dataclass(frozen=True)
class Boxing:
    """One conversion of a Blob between nd-SBPs, and what it costs each step."""
    producer: str            # the op (or variable path) whose output is converted
    consumer: str            # the op that needs it converted (or "<path> (optimizer)" for a gradient)
    src: Tuple
    dst: Tuple
    collectives: Tuple       # ((mesh axis, collective), ...), e.g. (("model", "all-reduce"),)
    bytes_per_step: float    # estimated bytes sent per device
    phase: str = "forward"   # forward | backward

    def __repr__(self):
        kinds = ", ".join(f"{k} over {a!r}" for a, k in self.collectives)
        return (f"Boxing({self.producer} -> {self.consumer}: ({', '.join(map(repr, self.src))}) -> "
                f"({', '.join(map(repr, self.dst))}), {kinds}, {self.bytes_per_step:,.0f} B, {self.phase})")


@dataclass(eq=False)
class Plan:
    """What the planner decided for one mesh: ``sbp[blob]`` (an nd-SBP per Blob), ``signatures[node]`` (a
    Signature per mesh axis), ``wanted[(node, i)]`` (the nd-SBP input ``i`` is boxed to) and ``boxing``."""
    axes: Axes
    sbp: Dict[Any, Tuple] = field(default_factory=dict)
    signatures: Dict[Any, Tuple[Signature, ...]] = field(default_factory=dict)
    wanted: Dict[Tuple[Any, int], Tuple] = field(default_factory=dict)
    boxing: List[Boxing] = field(default_factory=list)

    def input_sbp(self, node, i):
        """The nd-SBP input ``i`` of ``node`` is boxed to before the op runs."""
        return self.wanted.get((node, i), self.sbp[node.inputs[i]])


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


@dataclass(frozen=True)
class ExportSpec:
    """How an exported artifact is called (``Backend.export``): its endpoint's arguments and results, each a nest
    (lists, dicts) whose leaves are indices: ``arguments`` of ``Program.inputs`` (flattened as the engines flatten,
    a dict by its sorted keys: ``backend_common.leaves``), ``outputs`` of ``Program.outputs``."""
    format: str                 # "tf_saved_model" | "jax"
    inputs: Tuple               # per program input: (name, shape with None for a dim left free, dtype name)
    arguments: Tuple            # the endpoint's positional arguments
    outputs: Any                # what it returns: an index, or a list / dict of them (as ``predict`` returns)
    seed: int                   # the global seed a predict step draws its random ops with
    options: Mapping[str, Any] = field(default_factory=dict)    # the format's own options the user passed


# What a backend supplies ---------------------------------------------------------------------------------------
@runtime_checkable
class Backend(Protocol):
    name: str
    capabilities: Capabilities
    kernels: Mapping[str, "Kernel"]     # op name -> kernel, for every op the front end builds and custom ones

    def runtime(self, view: str, device_num: int, mesh: Optional[Tuple[Tuple[str, int], ...]],
                cluster: Optional[Cluster] = None) -> "Runtime":
        """A runtime for one view, device count and (consistent view) mesh ``((axis, size), ...)``; made once per
        distinct tuple and reused.  A one-device consistent runtime keeps the mesh's axis names, each of size 1.

        Several processes (``cluster``, only to a backend whose capabilities say ``processes``): every process of the
        job makes the same calls in the same order.  ``device_num`` counts the devices of all processes; process
        ``p`` owns global devices ``p * local .. (p + 1) * local - 1`` (``cluster.local(device_num)``), and the mesh
        lists devices in that order.  The backend joins its engine's own distributed runtime (once per process, on
        ``cluster.coordinator`` / ``cluster.addresses``).  Every host value handed to the runtime or an executable
        (variable values, feeds) is the whole logical value, the same in every process: each process puts only its
        own devices' blocks on them.  Every value returned (``read``, outputs, sums) is the whole logical value, in
        every process.  Such a runtime's ``barrier`` and ``gather`` (below) meet the other processes."""

    def check_device_count(self, n: int, what: str) -> None:
        """Raise ``flow.ConfigError`` naming ``what`` if ``n`` devices cannot be had in this process.  Called by
        ``flow.config.gpu_device_num``/``set_mesh`` where the engine is installed: it must not start the engine (it
        may reserve devices)."""

    def join(self, view: Optional[str], device_num: int, cluster: Cluster) -> None:
        """Several processes (``capabilities.processes``): join the engine's distributed runtime as soon as the
        process's device count is set (``view``: the view set explicitly, else None), before user code starts the
        engine; a backend that needs the view waits for one.  Never called for one process."""

    def cache_compilations(self, directory: Optional[str]) -> None:
        """``capabilities.caches_compilations``: keep the programs compiled from now on in ``directory`` and load
        them from there when a later process compiles the same (None: stop).  Called with the
        ``Placement.compilation_cache`` of each runtime the front end asks for, when it changed."""

    def export(self, program: Program, weights: Mapping[str, Any], spec: ExportSpec, filepath: str) -> str:
        """``capabilities.exports``: write the predict ``program`` with ``weights`` (each variable's whole logical
        value, numpy, by path) at ``filepath`` as an artifact of ``spec.format`` whose endpoint computes on one
        device what the program's step computes, for inputs of ``spec.inputs``.  Needs no runtime (the weights are
        values, whatever view or mesh trained them).  Returns how it was made, in a few words, for the user."""

    def load_export(self, filepath: str, format: str) -> Callable:
        """``capabilities.exports``: the artifact of ``format`` at ``filepath`` as a callable of host arrays."""


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

    def barrier(self, name: str) -> None:
        """Several processes: return once every process reached ``barrier(name)`` (one process: at once)."""

    def gather(self, array: Any) -> Any:
        """Several processes: every process's host array (the same shape in each) joined along dim 0 in process
        order, returned in every process (per-process datasets feed their shares of a batch this way)."""


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
        ahead of the host."""

    def steps(self, feeds: Sequence[Any], handles: Mapping[str, Handle], lrs: Sequence[float],
              first_step: int) -> List[Any]:
        """``capabilities.several_steps``: ``len(lrs)`` steps in one dispatch, at rates ``lrs`` and steps
        ``first_step, first_step + 1, ...``; ``feeds``: per input, a ``Rows`` or an array stacked over the steps.
        Returns per output the values of every step stacked."""

    def takes_rows(self, rows: int, sources: Sequence[Any]) -> bool:
        """``capabilities.takes_rows``: whether one step of ``rows`` rows of the whole training arrays ``sources``
        runs faster through ``steps`` with ``Rows`` (the arrays kept on the devices) than fed them."""

    def compiled_text(self, feeds: Sequence[Any], handles: Mapping[str, Handle], lr: float, step: int) -> str:
        """``capabilities.shows_program``: the program the engine compiles for such a step, as text, compiled and
        not run (``parallel_plan().compiled_program()``)."""


@runtime_checkable
class PendingReader(Protocol):
    """The engine's object that reads ``Pending`` values."""

    def read(self, values: Sequence[Any]) -> List[Any]:
        """Their host arrays, read together (one wait, the transfers overlapped)."""

    def total(self, values: Sequence[Any]) -> float:
        """The float64 sum of all their elements (an engine may add them up on its devices, with fewer reads)."""


class Pending:
    """A ``"sum"`` output still on the engine's devices (``Executable.__call__``): ``value`` what the engine needs to
    read it, ``reader`` a ``PendingReader``.  ``np.asarray`` and ``float`` read one alone; ``read_all`` and ``total``
    many at once."""
    __slots__ = ("value", "reader")

    def __init__(self, value, reader: PendingReader):
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
    reader's values summed by its ``total``, the rest on the host."""
    values, result = list(values), 0.0
    for reader, ks in _by_reader(values).items():
        result += float(reader.total([values[k].value for k in ks]))
        for k in ks:
            values[k] = None
    return result + sum(float(np.sum(np.asarray(v, np.float64))) for v in values if v is not None)


def _by_reader(values):
    """``{reader: [index of each Pending value it reads]}``, in order."""
    groups = {}
    for k, v in enumerate(values):
        if isinstance(v, Pending):
            groups.setdefault(v.reader, []).append(k)
    return groups


class Kernel(Protocol):
    """Lowers one node (``node.op.name``, ``node.attrs``) to engine ops: returns its output, or a tuple."""

    def __call__(self, node: Node, *inputs, ctx: "KernelContext"): ...


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


class ArrayNamespace(Protocol):
    """What optimizer rules compute with (``OptimizerRules.apply_gradient(xp, ...)``).

    Variables and slots reach a rule as references: reading one (arithmetic on it) reads its current value, and
    ``assign(ref, value)`` replaces it.  An engine that updates in place passes its variables; one that cannot (a
    functional engine) passes ``backend_common.functional.Ref`` boxes and takes their final values (see
    ``FunctionalMath``).  ``whole_rules`` names the rules it has one kernel for: ``"sgd"`` (``apply_sgd``), ``"adam"``
    (``apply_adam``); see ``Optimizer.update``."""
    whole_rules: frozenset

    def sqrt(self, x): ...
    def minimum(self, a, b): ...
    def maximum(self, a, b): ...
    def clip(self, x, lo, hi): ...
    def abs(self, x): ...
    def sign(self, x): ...                          # -1, 0 or 1 elementwise
    def pow(self, x, exponent): ...                 # elementwise x ** exponent (a number)
    def assign(self, ref, value) -> None: ...
    def where(self, flag, a, b): ...
    def greater_equal(self, a, b): ...
    def all_finite(self, values): ...               # one boolean: every element of every value finite
    def when(self, flag, update, refs) -> None: ...  # update() (assigning refs) takes effect only where flag holds
