"""A backend's kernel table: adding kernels, the ops it must cover, and what a kernel derives from its node (a dropout's seed, a reshape's shape)."""
import hashlib

from .. import ops
from ..errors import ConfigError


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
