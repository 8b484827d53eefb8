"""SBP propagation: for each mesh axis pick the op signature with the lowest Boxing cost.

Used by the planner (``plan.py``), whose one plan ``blob.sbp`` reads.
Axes are decided one after another; a tensor dim split over one mesh axis
is not split again over another (DTensor gives each tensor dim one mesh axis).
"""
from ..errors import SBPError, describe_shape
from ..framework.op_def import Signature
from ..sbp import Split, broadcast, format_nd, partial_sum
from . import boxing

LATENCY_BYTES = 4096.0   # what starting one collective costs, in bytes: fewer collectives win ties
UNSPLIT_BATCH = 1e15     # charged for gathering the batch on the "data" axis: every later op would compute it all
RESPLIT_WEIGHT = 1e15    # charged for moving a weight's split to another dim (all-to-all) each step


def _divides(sbp, shape, n):
    if not isinstance(sbp, Split):
        return True
    if sbp.axis >= len(shape):
        return False
    d = shape[sbp.axis]
    return d is None or d % n == 0


class Taken:
    """Per input and output of a node, the product of the sizes of the mesh axes already splitting each tensor dim,
    as the axes are decided one after another.  A dim split on an earlier axis is split again only where the backend
    declares it can (``several``: ``Backend.splits_dim_over_several_axes``) and its size divides by all of them."""

    def __init__(self, n_inputs, n_outputs, several=False):
        self.inputs, self.outputs = [{} for _ in range(n_inputs)], [{} for _ in range(n_outputs)]
        self.several = several

    def fits(self, s, shape, used, n):
        if not _divides(s, shape, n):
            return False
        if not isinstance(s, Split) or s.axis not in used:
            return True
        return self.several and (shape[s.axis] is None or shape[s.axis] % (used[s.axis] * n) == 0)

    def add(self, sig, n):
        for used, s in zip(self.inputs + self.outputs, sig.inputs + sig.outputs):
            if isinstance(s, Split):
                used[s.axis] = used.get(s.axis, 1) * n


def legal(sig, node, specs, n, taken=None):
    """Whether ``sig`` fits the shapes on an axis of ``n`` devices, splitting a dim an earlier axis split only as
    ``taken`` allows."""
    taken = taken or Taken(len(node.inputs), len(specs))
    return all(taken.fits(s, x.shape, used, n) for s, x, used in zip(sig.inputs, node.inputs, taken.inputs)) and \
        all(taken.fits(s, shape, used, n) for s, (shape, _), used in zip(sig.outputs, specs, taken.outputs))


def _cost(src, dst, size, n, whole_partials=False):
    """Planner cost of one Boxing: its bytes, plus a fixed latency for each real collective.

    ``whole_partials`` charges a reduce-scatter as an all-reduce and a slice: the planner's second try, which
    keeps the greedy choice from entering split chains (P->S, later S->B) that cost more than one all-reduce.
    """
    kind = boxing.collective(src, dst)
    latency = LATENCY_BYTES if kind is not None and kind not in boxing.LOCAL and n > 1 else 0.0
    if whole_partials and kind == "reduce-scatter":
        return boxing.cost(src, broadcast, size, n) + boxing.cost(broadcast, dst, size, n) + latency
    return boxing.cost(src, dst, size, n) + latency


def choose(node, specs, axis_index, n, taken=None, out_wants=None, supports=None, whole_partials=False,
           axis_name=None):
    """The cheapest legal signature of ``node`` on one mesh axis of ``n`` devices, and its cost.

    The cost is the Boxing of the inputs to the signature and, when ``out_wants`` gives what each output's
    consumers want (nd-SBPs), the Boxing of the outputs to those.  On the ``data`` axis, a signature that would
    gather a batch split there (a Blob whose dim 0 is the batch, from S(0) to anything else) is the last resort:
    the bytes are few (ids), but every op after it would compute the whole batch on each device, which Boxing
    costs do not see (ZeRO's split embedding once took a one-hot lookup of the gathered ids so).  Likewise a
    weight is used as its layout rules split it, or gathered whole (ZeRO), never split along another dim each
    step: an all-to-all of a row-split table to columns looked cheap and led the planner into splitting the hidden
    dim of everything after it (and DTensor into a step it could not lay out).
    """
    in_sbps = [x.sbp[axis_index] for x in node.inputs]
    best, best_cost = None, boxing.INFEASIBLE
    for sig in _offered(node, supports):
        if not legal(sig, node, specs, n, taken):
            continue
        c = sum(_cost(cur, want, boxing.nbytes(x.shape, x.dtype), n, whole_partials) + _policy(cur, want, x, n,
                                                                                               axis_name)
                for cur, want, x in zip(in_sbps, sig.inputs, node.inputs))
        for out, (shape, dtype), wants in zip(sig.outputs, specs, out_wants or ()):
            c += sum(_cost(out, w[axis_index], boxing.nbytes(shape, dtype), n, whole_partials) for w in wants)
        c += inner_bytes(sig, specs, n) + LATENCY_BYTES * len(sig.collectives) * (n > 1) + sig.temporary_bytes / n
        if c < best_cost:
            best, best_cost = sig, c
    return best, best_cost


def _policy(cur, want, x, n, axis_name):
    """What choose charges beyond bytes for boxing input ``x`` from ``cur`` to ``want`` (see choose)."""
    if n == 1 or cur == want:
        return 0.0
    if axis_name == "data" and cur == Split(0) and getattr(x, "batched", False):
        return UNSPLIT_BATCH
    if getattr(x, "weight", False) and isinstance(cur, Split) and isinstance(want, Split):
        return RESPLIT_WEIGHT
    return 0.0


def inner_bytes(sig, specs, n):
    """Bytes each device sends for the collectives ``sig``'s kernel runs itself (see Signature): each an
    all-reduce of a tensor shaped like the first output."""
    shape, dtype = specs[0]
    return len(sig.collectives) * boxing.cost(partial_sum, broadcast, boxing.nbytes(shape, dtype), n)


def _offered(node, supports):
    """The op's signatures that the backend can realise (``supports(op_name, signature)``; None: all)."""
    sigs = node.op.signatures(node.inputs, node.attrs)
    return [s for s in sigs if supports is None or supports(node.op.name, s)]


def signatures(node, specs, axes, out_wants=None, supports=None, whole_partials=False, several_axes=False):
    """One Signature per mesh axis for ``node``: forced, a constraint's own, or the cheapest.

    ``node.inputs`` carry ``.shape``, ``.dtype``, ``.ndim`` and ``.sbp`` (nd-SBP); ``out_wants`` see choose;
    ``supports`` is the backend's say on which signatures it can realise; ``whole_partials`` see _cost;
    ``several_axes``: whether the backend can split one tensor dim over several mesh axes (``Taken``).
    """
    forced = node.signature
    if forced is not None and len(forced) != len(axes):
        raise SBPError(f"op {_name(node)}: forced signature expected {len(axes)} entries, one per mesh axis "
                       f"{[a for a, _ in axes]}, received {forced!r}")
    taken = Taken(len(node.inputs), len(specs), several_axes)
    chosen = []
    for i, (axis, n) in enumerate(axes):
        if node.op.kind == "constraint":
            sig = Signature((node.attrs["sbp"][i],), (node.attrs["sbp"][i],))
        elif forced is not None:
            sig = forced[i]
            options = _offered(node, supports)
            if sig not in options or not legal(sig, node, specs, n, taken):
                raise SBPError(f"op {_name(node)}: forced signature {sig!r} on mesh axis {axis!r} ({n} devices) "
                               f"expected one this backend can realise for these shapes: "
                               f"{[s for s in options if legal(s, node, specs, n, taken)]}")
        else:
            sig, _ = choose(node, specs, i, n, taken, out_wants, supports, whole_partials, axis)
            sig = sig or Signature((broadcast,) * len(node.inputs), (broadcast,) * len(specs))
        taken.add(sig, n)
        chosen.append(sig)
    return chosen


def _name(node):
    return repr(getattr(node, "name", node.op.name))


def output_sbps(sigs, n_outputs):
    return [tuple(sig.outputs[k] for sig in sigs) for k in range(n_outputs)]


def input_sbps(sigs, n_inputs):
    return [tuple(sig.inputs[k] for sig in sigs) for k in range(n_inputs)]


def check_nd(nd_sbp, shape, what, several_axes=False, backend="the backend"):
    """An nd-SBP may split each tensor dim over at most one mesh axis, unless ``backend`` can split one over
    several (DTensor gives each dim one mesh axis)."""
    dims = [s.axis for s in nd_sbp if isinstance(s, Split)]
    if several_axes:
        return
    if len(set(dims)) != len(dims):
        twice = next(d for d in dims if dims.count(d) > 1)
        raise SBPError(f"{what}: expected each tensor dim split over at most one mesh axis, received "
                       f"{format_nd(nd_sbp)}, which splits dim {twice} of shape {describe_shape(shape)} over two "
                       f"axes, which backend {backend!r} cannot; split another dim on one of them, or "
                       f"broadcast there")
