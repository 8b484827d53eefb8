"""What every backend needs and would otherwise write again: the front end's own meanings, written once.

A backend imports from flowlayers only ``contract`` (the types it is handed), ``errors``, ``sbp`` and this module:
the kernel table helpers, the ops it must cover, running several steps one by one, splitting a batch into
micro-batches, and optimizer rules for engines without in-place update (``functional``).
"""
import hashlib

import numpy as np

from . import ops
from .contract import Rows, read_all
from .errors import ConfigError
from .optimizers import functional  # noqa: F401  (re-exported: optimizer rules for functional engines)

__all__ = ["Executable", "CustomKernels", "add_kernel", "op_names", "check_backend", "step_by_step", "micro_batches",
           "micro_batch_bounds", "replica_rows", "op_seed", "reshaped", "device_count_error", "functional", "leaves",
           "nested", "exported_inputs", "Stage", "placement_stages"]


class Executable:
    """What every backend's executables share: a Program bound to a runtime, with ``plan(batch)`` (consistent view:
    the front end's Plan for a fed batch size) and the global ``seed`` dropout draws with; and the answers of the
    optional members (``contract.Executable``) for a backend whose ``Capabilities`` do not claim them."""

    def __init__(self, runtime, program, plan, seed):
        self.runtime, self.program, self.plan, self.seed = runtime, program, plan, seed

    def updates_variables(self, step):
        """Whether step ``step`` applies the optimizer's rule (False: it only accumulates the gradient)."""
        return self.program.optimizer is None or self.program.optimizer.is_update_step(step)

    def steps(self, feeds, handles, lrs, first_step):
        return step_by_step(self, feeds, handles, lrs, first_step)

    def takes_rows(self, rows, sources):
        return False

    def compiled_text(self, feeds, handles, lr=0.0, step=1):
        raise ConfigError(f"step {self.program.name!r}: this backend does not show the program its engine compiles "
                          f"(its capabilities say shows_program=False); expected a backend that does (jax)")


def add_kernel(table, op_name, fn, replace=False, builtin=()):
    """Put ``fn`` into a backend's kernel ``table`` as the kernel of ``op_name`` (a backend's ``register_kernel``);
    a name that has another kernel there, or is one of the ``builtin`` ops, is refused unless ``replace``."""
    if not replace and (op_name in builtin or (op_name in table and table[op_name] is not fn)):
        held = "a built-in op's" if op_name not in table else \
            f"{table[op_name].__module__}.{table[op_name].__qualname__}"
        raise ConfigError(f"register_kernel({op_name!r}): expected a new op name, received one that already has a "
                          f"kernel ({held}); name the op differently, or pass replace=True to override it")
    table[op_name] = fn
    return fn


class CustomKernels(dict):
    """The kernels of custom ops a user registers with a backend (its ``register_kernel``), kept apart from its
    built-in table, which imports the engine and is loaded only when a step is lowered: the table a backend lowers
    with looks here first (``collections.ChainMap(custom, built_in)``)."""

    def register(self, op_name, replace=False):
        """Decorator: ``fn(node, *inputs, ctx)`` becomes the kernel of the op named ``op_name``; a name that has a
        kernel (a built-in op's, or one registered before) is refused unless ``replace``."""
        return lambda fn: add_kernel(self, op_name, fn, replace, builtin=op_names())


def op_names():
    """The names of every op the front end builds (``flowlayers/ops``): what a backend's kernel table covers,
    besides custom ops registered by users."""
    return sorted(name for name, op in ops.by_name().items() if op.kind in ("compute", "constant", "constraint"))


def check_backend(backend, kernels=None):
    """What any backend must show without running a model: the protocol's members, views the front end knows, and a
    kernel for every front-end op in ``kernels`` (default: its own table).  Returns a list of what is missing."""
    missing = [f"Backend.{m}" for m in ("name", "capabilities", "kernels", "runtime", "check_device_count", "join")
               if not hasattr(backend, m)]
    views = backend.capabilities.views if hasattr(backend, "capabilities") else ()
    missing += [f"view {v!r}" for v in views if v not in ("consistent", "mirrored")]
    kernels = getattr(backend, "kernels", {}) if kernels is None else kernels
    return missing + [f"kernel {name!r}" for name in op_names() if name not in kernels]


def step_by_step(executable, feeds, handles, lrs, first_step):
    """Several steps as one call of ``executable`` per step (``Executable.steps``' meaning, for an executable
    without it, or one falling back): per input a ``Rows`` or an array stacked over the steps; returns per output
    the values of every step stacked."""
    stacked = [f.gather() if isinstance(f, Rows) else f for f in feeds]
    per_step = [executable([f[k] for f in stacked], handles, lr, first_step + k) for k, lr in enumerate(lrs)]
    return [np.stack(read_all(values)) for values in zip(*per_step)]


def micro_batch_bounds(rows, n):
    """Where ``n`` micro-batches of ``rows`` rows (a number, or an engine's scalar) start and end: runs of
    consecutive rows whose sizes differ by one at most (some empty where there are fewer rows than ``n``)."""
    return [rows * k // n for k in range(n + 1)]


def replica_rows(feed, n):
    """A host batch's rows for each of ``n`` replicas, in order (the first ones get one more where ``n`` does not
    divide the batch): what the mirrored view feeds each device."""
    return np.array_split(np.asarray(feed), n) if n > 1 else [np.asarray(feed)]


def op_seed(seed, op_name, op_seed=None):
    """The 30-bit seed of one random op (dropout) from the global ``seed``, the op's name and its own seed: with
    the step and the replica, all its draw depends on, so reruns repeat it in every view."""
    digest = hashlib.sha256(f"{seed}:{op_name}:{op_seed}".encode()).digest()
    return int.from_bytes(digest[:4], "little") & 0x3FFFFFFF


def reshaped(node):
    """The shape a ``reshape`` node's kernel gives its input: where the batch dim is carried through, ``-1`` there,
    so the rows fed (a replica's share, or a smaller last batch) stay what they were; else the shape asked for."""
    out, given = node.outputs[0].shape, node.inputs[0].shape
    if out and given and out[0] == given[0] and None not in out[1:]:
        return (-1,) + tuple(out[1:])
    return tuple(-1 if d is None else d for d in node.attrs["shape"])


def device_count_error(what, n, have, platform, engine, started_by_flowlayers):
    """The error for ``n`` devices asked of a process that can give ``have`` (``platform``: "cpu" or an
    accelerator's name; ``engine``: "TensorFlow" or "JAX", which cannot add CPU devices once started, by us or by
    code that ran first)."""
    if platform != "cpu":
        why, fix = f"this host has {have} {platform.upper()} device(s)", f"use at most {have}"
    elif started_by_flowlayers:
        why = (f"this process started {engine} with {have} CPU device(s), and {engine} cannot add devices after it "
               f"starts")
        fix = (f"use at most {have}, or in a new process set FLOWLAYERS_CPU_DEVICES={n} (or call "
               f"flow.config.gpu_device_num({n})) before the first model runs")
    else:
        why = (f"{engine} was started by code that ran before flowlayers could configure devices, with {have} CPU "
               f"device(s), and it cannot add devices after it starts")
        fix = f"call flow.config.gpu_device_num({n}) before any {engine} code runs, or use at most {have}"
    return ConfigError(f"{what}: expected at most {have} devices, received {n}: {why}; {fix}")


def micro_batches(feeds, n):
    """Host feeds -> ``n`` lists of feeds, each a run of consecutive rows (sizes differ by one at most); a batch of
    fewer rows runs as one micro-batch per row (the sum of the gradients is the same)."""
    if n == 1 or not feeds or not np.ndim(feeds[0]):
        return [list(feeds)]
    n = min(n, len(feeds[0]))
    return [list(chunk) for chunk in zip(*[np.array_split(np.asarray(f), n) for f in feeds])]


def leaves(tree):
    """The leaves of a nest of lists, tuples and dicts, in the order TensorFlow's and JAX's trees flatten it (a dict
    by its sorted keys)."""
    if isinstance(tree, dict):
        return [leaf for key in sorted(tree) for leaf in leaves(tree[key])]
    if isinstance(tree, (list, tuple)):
        return [leaf for item in tree for leaf in leaves(item)]
    return [tree]


def nested(structure, values):
    """``structure`` (a nest whose leaves are indices) with each index replaced by ``values[index]``: what an
    exported endpoint returns (``ExportSpec.outputs``)."""
    if isinstance(structure, dict):
        return {key: nested(item, values) for key, item in structure.items()}
    if isinstance(structure, (list, tuple)):
        return [nested(item, values) for item in structure]
    return values[structure]


def exported_inputs(spec, arguments):
    """The program's inputs, in order, from an exported endpoint's ``arguments`` (nested as
    ``ExportSpec.arguments``)."""
    inputs = [None] * len(spec.inputs)
    for index, value in zip(leaves(list(spec.arguments)), leaves(list(arguments))):
        inputs[index] = value
    return inputs


class Stage:
    """Consecutive ops of one placement (None: all devices), with the Blobs they read from outside (``inputs``)
    and those later stages or the step's results read (``outputs``)."""

    def __init__(self, placement):
        self.placement, self.nodes, self.inputs, self.outputs = placement, [], [], []


def placement_stages(program):
    """``program``'s ops cut where the placement changes (``flow.scope.placement`` on some devices), in the
    program's (topological) order, for an engine that runs each stage as a program of its own on its devices and
    copies what crosses between them: placeholders and variables are inputs of the stages reading them."""
    stages = []
    for node in program.nodes:
        if node.op.kind in ("placeholder", "variable"):
            continue
        if not stages or stages[-1].placement != node.placement:
            stages.append(Stage(node.placement))
        stages[-1].nodes.append(node)
    made_in = {b: k for k, s in enumerate(stages) for n in s.nodes for b in n.outputs}
    wanted = set(program.results)
    for k, stage in enumerate(stages):
        stage.inputs = list(dict.fromkeys(x for n in stage.nodes for x in n.inputs if made_in.get(x) != k))
        for later in stages[k + 1:]:
            wanted.update(x for n in later.nodes for x in n.inputs if made_in.get(x) == k)
    for k, stage in enumerate(stages):
        stage.outputs = [b for n in stage.nodes for b in n.outputs if b in wanted]
    return stages
