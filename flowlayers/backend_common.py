"""What every backend needs and would otherwise write again: the front end's own meanings, written once.

A backend imports from flowlayers only ``contract`` (the types it is handed), ``errors``, ``sbp`` and this module:
the kernel table helpers, the ops it must cover, running several steps one by one, splitting a batch into
micro-batches, the recurrent cells' and the normalisations' arithmetic (``rnn_cell``, ``batch_norm``,
``layer_norm``), and optimizer rules for engines without in-place
update (``functional``).
"""
import hashlib

import numpy as np

from . import ops
from .contract import Rows, read_all
from .errors import ConfigError
from .sbp import Split
from .optimizers import functional  # noqa: F401  (re-exported: optimizer rules for functional engines)

__all__ = ["Executable", "KernelContext", "CustomKernels", "add_kernel", "op_names", "check_backend",
           "step_by_step", "micro_batches", "micro_batch_bounds", "replica_rows", "op_seed", "reshaped",
           "device_count_error", "functional", "leaves", "nested", "exported_inputs", "tensor_name", "Stage",
           "placement_stages", "StagedSteps", "rnn_inputs", "rnn_cell", "batch_norm", "layer_norm"]


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


class KernelContext:
    """What every backend's kernel context (``contract.KernelContext``) answers alike, outside the consistent view:
    the phase, no nd-SBP for any input, and layout hooks that leave tensors as they are.  A backend's context adds
    its engine's randomness and constants (``phase`` set there); its consistent view's overrides the hooks."""

    def training(self, flag):
        """Whether a kernel runs as in training: its layer's ``training`` argument ``flag``, else the step's phase."""
        return self.phase == "train" if flag is None else bool(flag)

    def input_sbp(self, node, i):
        """The nd-SBP input ``i`` of ``node`` reaches its kernel in (the kernel may take the form that signature
        needs), or None outside the consistent view."""
        return None

    def splits(self, node, i, dim):
        """Whether input ``i`` of ``node`` reaches its kernel split along ``dim`` over some devices."""
        nd = self.input_sbp(node, i)
        return nd is not None and Split(dim % node.inputs[i].ndim) in nd

    def lay_out(self, tensor, nd_sbp):
        """Hook for the consistent view: a kernel's own intermediate ``tensor`` laid out as ``nd_sbp``."""
        return tensor

    def pin(self, blob, tensor):
        """Hook for the consistent view: ``tensor`` put in ``blob``'s planned layout."""
        return tensor

    def box(self, node, i, tensor):
        """Hook for the consistent view: Boxing of input ``i`` of ``node`` to its signature's layout."""
        return tensor


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


def tensor_name(name):
    """An input's name as TensorFlow takes it for a tensor in an exported signature (letters, digits, ``_.-/``; a
    letter first)."""
    cleaned = "".join(c if c.isalnum() or c in "_.-/" else "_" for c in name)
    return cleaned if cleaned[:1].isalpha() else f"input_{cleaned}"


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


class StagedSteps:
    """The loop of a step run stage by stage (``placement_stages``), for a backend's executable (a mixin): each
    micro-batch forward through the stages in order, then backward through them in reverse, each variable's
    gradient summed where the variable lives and each Blob's cotangent where the Blob was made.  The executable
    has ``program``, ``plan(batch)`` and ``_stages``, and writes the engine's half:

    - ``_stage_input(stage, x, value, plan, values)``: what ``stage`` reads for Blob ``x`` (``value``: its feed or
      an earlier stage's output, None for a variable; ``values``: what the executable handed ``staged_run``);
    - ``_stage_step(stage, step)``: the step counter on the stage's devices;
    - ``_functions(k, size, plan, diff)``: stage ``k``'s (forward, backward) for micro-batches of ``size`` rows,
      the inputs marked in ``diff`` differentiated;
    - ``_run_forward(stage, forward, d_args, c_args, at)``: the stage's outputs;
    - ``_loss_cotangent(loss, scale)``: the loss's cotangent (``scale`` per element), or None where the engine's
      backward takes ``scale`` itself;
    - ``_run_backward(stage, backward, d_args, c_args, at, given, scale, watched)``: (the gradients of the
      differentiated inputs, of the watched Blobs), from ``given`` (the cotangents of the stage's floating
      outputs, None: none), ``scale`` (where the stage makes the loss and ``_loss_cotangent`` gave None, else
      None) and ``watched`` (the values of the watched Blobs it makes, ``flow.watch_diff``);
    - ``_add_gradient(path, g, held)``: a variable's gradient ``g`` added to ``held`` (None: the first);
    - ``_cotangent_as(g, value)``: ``g`` where ``value``, the Blob's own value, lives.
    """

    def staged_run(self, sizes, chunks, step, values=None):
        """(per micro-batch the Blobs each made, ``{variable path: gradient}``, the watched Blobs' gradients, of
        the first micro-batch) of the micro-batches ``chunks`` of ``sizes`` rows."""
        p = self.program
        trained = {v.path for v in p.trainable}
        runs = [self._staged_forward(size, chunk, step, values, trained) for size, chunk in zip(sizes, chunks)]
        grads, watched = {}, []
        if p.loss is not None:
            count = sum(int(np.prod(env[p.loss].shape)) for env, _ in runs)
            for k, (env, calls) in enumerate(runs):
                seen = self._staged_backward(env, calls, 1.0 / count, grads)
                if k == 0:
                    watched = [seen[b] for b in p.gradients]
        return [env for env, _ in runs], grads, watched

    def _differentiable(self, blob, trained):
        """Whether the step differentiates ``blob``: a floating Blob an op made, or a trained variable's."""
        if not blob.dtype.is_floating or self.program.loss is None:
            return False
        if blob.node.op.kind == "variable":
            return blob.node.variable.path in trained
        return blob.node.op.kind != "placeholder"

    def _staged_forward(self, size, chunk, step, values, trained):
        """One micro-batch through the stages: (Blob -> value where it was made, per stage what its backward
        takes)."""
        p = self.program
        plan = self.plan(size)
        env, calls = dict(zip(p.inputs, chunk)), []
        for k, stage in enumerate(self._stages):
            args = [self._stage_input(stage, x, env.get(x), plan, values) for x in stage.inputs]
            diff = tuple(self._differentiable(x, trained) for x in stage.inputs)
            forward, backward = self._functions(k, size, plan, diff)
            at = self._stage_step(stage, step)
            d_args = [a for a, d in zip(args, diff) if d]
            c_args = [a for a, d in zip(args, diff) if not d]
            env.update(zip(stage.outputs, self._run_forward(stage, forward, d_args, c_args, at)))
            calls.append((stage, diff, backward, d_args, c_args, at))
        return env, calls

    def _staged_backward(self, env, calls, scale, grads):
        """The gradients of one micro-batch, stages in reverse, each variable's added into ``grads``.  Returns
        each watched Blob's gradient."""
        p = self.program
        seed = self._loss_cotangent(env[p.loss], scale)
        cts, seen = ({} if seed is None else {p.loss: seed}), {}
        for stage, diff, backward, d_args, c_args, at in reversed(calls):
            floating = [b for b in stage.outputs if b.dtype.is_floating]
            watched = [b for b in p.gradients if b in stage.outputs]
            given = [cts.get(b) for b in floating]
            own = scale if seed is None and p.loss in stage.outputs else None
            if not watched and (not d_args or (all(c is None for c in given) and own is None)):
                continue
            d_grads, w_grads = self._run_backward(stage, backward, d_args, c_args, at, given, own,
                                                  [env[b] for b in watched])
            seen.update(zip(watched, w_grads))
            for x, g in zip([x for x, d in zip(stage.inputs, diff) if d], d_grads):
                if x.node.op.kind == "variable":
                    path = x.node.variable.path
                    grads[path] = self._add_gradient(path, g, grads.get(path))
                else:
                    g = self._cotangent_as(g, env[x])
                    cts[x] = g if x not in cts else cts[x] + g
        return seen


def rnn_inputs(attrs, rest):
    """(bias or None, given initial states (a tuple, maybe empty), mask or None): an ``rnn`` node's inputs after
    its two kernels, ``rest``, as its ``attrs`` lay them out (``flowlayers/ops/recurrent.py``)."""
    rest = list(rest)
    bias = rest.pop(0) if attrs["use_bias"] else None
    mask = rest.pop() if attrs["masked"] else None
    return bias, tuple(rest), mask


def rnn_cell(xp, attrs, recurrent, recurrent_bias, masks):
    """``step(states, projected input) -> (output, states)``: one time step of the cell ``attrs["cell"]`` (Keras'
    SimpleRNN, LSTM and GRU cells), written over a backend's namespace ``xp``: ``xp.activation(name)``,
    ``xp.project(x, weight, masks)`` (``x @ weight``, each gate's columns from ``x`` times that gate's dropout mask
    in ``masks``, None: none) and ``xp.gates(z, n)`` (``z``'s last dim cut in ``n`` equal parts)."""
    act, gate = xp.activation(attrs["activation"]), xp.activation(attrs["recurrent_activation"])
    units, project, gates = attrs["units"], xp.project, xp.gates

    def simple(states, xw):
        h = act(xw + project(states[0], recurrent, masks))
        return h, (h,)

    def lstm(states, xw):
        h, c = states
        i, f, g, o = gates(xw + project(h, recurrent, masks), 4)
        c = gate(f) * c + gate(i) * act(g)
        h = gate(o) * act(c)
        return h, (h, c)

    def gru(states, xw):
        (h,) = states
        x_z, x_r, x_h = gates(xw, 3)
        if attrs["reset_after"]:
            inner = project(h, recurrent, masks)
            inner = inner + recurrent_bias if recurrent_bias is not None else inner
            r_z, r_r, r_h = gates(inner, 3)
            z, r = gate(x_z + r_z), gate(x_r + r_r)
            candidate = act(x_h + r * r_h)
        else:
            r_z, r_r = gates(project(h, recurrent[:, :2 * units], None if masks is None else masks[:2]), 2)
            z, r = gate(x_z + r_z), gate(x_r + r_r)
            candidate = act(x_h + project(r * h, recurrent[:, 2 * units:], None if masks is None else masks[2:]))
        h = z * h + (1 - z) * candidate
        return h, (h,)

    return {"simple": simple, "lstm": lstm, "gru": gru}[attrs["cell"]]


def batch_norm(xp, node, x, gamma, beta, mean, var, ctx):
    """The ``batch_norm`` op (Keras' BatchNormalization): (y, new moving mean, new moving variance), written over a
    backend's namespace ``xp``: ``xp.batch_moments(x, axes, ctx)`` (the batch's mean and variance over ``axes``),
    ``xp.rsqrt``, ``xp.reshape`` and ``xp.identity`` (a moving statistic kept as it is, as a new value)."""
    a = node.attrs
    axis, rank = a["axis"], len(x.shape)
    shape = [1] * rank
    shape[axis] = -1
    if ctx.training(a["training"]):
        batch_mean, batch_var = xp.batch_moments(x, [i for i in range(rank) if i != axis], ctx)
        m = a["momentum"]
        new_mean = mean * m + batch_mean * (1.0 - m)
        new_var = var * m + batch_var * (1.0 - m)
        use_mean, use_var = batch_mean, batch_var
    else:
        new_mean, new_var = xp.identity(mean), xp.identity(var)
        use_mean, use_var = mean, var
    inv = xp.rsqrt(xp.reshape(use_var, shape) + a["epsilon"]) * xp.reshape(gamma, shape)
    y = (x - xp.reshape(use_mean, shape)) * inv + xp.reshape(beta, shape)
    return y, new_mean, new_var


def layer_norm(xp, node, x, gamma, beta, ctx):
    """The ``layer_norm`` op (Keras' LayerNormalization) over ``xp`` (``batch_norm``'s, with ``xp.moments(x, axes)``:
    mean and variance over ``axes``, kept as dims of size 1)."""
    axes = list(node.attrs["axes"])
    mean, var = xp.moments(x, axes)
    shape = [x.shape[i] if i in axes else 1 for i in range(len(x.shape))]
    y = (x - mean) * xp.rsqrt(var + node.attrs["epsilon"])
    return y * xp.reshape(gamma, shape) + xp.reshape(beta, shape)
