"""Planning a Program for a mesh: an nd-SBP for every Blob, a signature per op, and the Boxing between.

Placeholders split their batch over the ``data`` axis (when it divides),
variables follow their layout rules, constraints and forced signatures are
honoured, and every other op takes the signature with the cheapest Boxing
(see propagate.choose).  Where a producer's SBP differs from what its
consumer's signature wants, a Boxing is recorded with the collective it
needs and its bytes per step; the backward pass is planned by the
transposition rules below, so a step's gradient all-reduces are listed too.
"""
from ..contract import Boxing, Plan
from ..sbp import Signature, Split, broadcast, partial_sum
from . import boxing, propagate


def program_plan(program, placement, capabilities, batch=None):
    """The Plan of ``program`` on ``placement``'s mesh for ``batch`` fed rows (None: the placeholders' own batch
    dims), offering the signatures ``capabilities`` (the backend's) can realise: a pure function of its arguments,
    which needs no engine."""
    return plan(program.nodes, placement.axes, batch, program.loss, program.trainable, sources(placement),
                capabilities.supports, several_axes=capabilities.splits_dim_over_several_axes)


def sources(placement):
    """``source_sbp(node, axes, batch)`` for ``plan``: in the consistent view a variable's nd-SBP is its layout on
    ``placement``, a placeholder's is ``placeholder_sbp``; the mirrored view is planned as its replicas run."""
    def source_sbp(node, axes, batch=None):
        if node.op.kind == "variable":
            return node.variable.layout(placement)
        return placeholder_sbp(node, axes, batch)
    return source_sbp if placement.consistent else _replicas


def _replicas(node, axes, batch=None):
    """The mirrored view as a plan sees it: every replica holds whole variables; the batch is split over them."""
    if node.op.kind == "variable":
        return (broadcast,)
    return (Split(0),) if node.outputs[0].shape else (broadcast,)


def placeholder_sbp(node, axes, batch=None):
    """A placeholder's batch split over the ``data`` axis (given the fed batch size, when it divides)."""
    shape = node.outputs[0].shape
    batch = shape[0] if batch is None and shape else batch
    return tuple(Split(0) if a == "data" and shape and (batch is None or batch % n == 0) else broadcast
                 for a, n in axes)


class _View:
    """A Blob as the planner sees it: the fed shape, dtype and planned SBP, whether dim 0 is the batch and whether
    it is a variable's value."""
    __slots__ = ("shape", "dtype", "sbp", "ndim", "batched", "weight")

    def __init__(self, shape, dtype, sbp, batched=False, weight=False):
        self.shape, self.dtype, self.sbp, self.ndim = shape, dtype, sbp, len(shape)
        self.batched, self.weight = batched, weight


class _Node:
    __slots__ = ("op", "inputs", "attrs", "name", "signature")

    def __init__(self, node, inputs):
        self.op, self.attrs, self.name, self.inputs = node.op, node.attrs, node.name, inputs
        self.signature = node.signature


def plan(nodes, axes, batch, loss, trainable, source_sbp, supports=None, rounds=3, several_axes=False):
    """A Plan for ``nodes`` on mesh ``axes`` ([(name, size), ...]) with ``batch`` rows fed; ``source_sbp(node,
    axes, batch)`` lays out the placeholders and variables (``sources``).

    The first round is greedy (each op's cheapest signature given its inputs); later rounds also count the
    Boxing of each op's outputs to what its consumers wanted in the round before, until nothing changes.
    ``loss`` and ``trainable`` (Variables) add the backward pass's Boxing; ``supports(op_name, signature)``
    limits the signatures to those the backend can realise; ``several_axes``, whether it can split one tensor
    dim over several mesh axes (else a dim is split on one axis at most).

    Greedy choice can take a reduce-scatter (P->S) that looks cheaper than an all-reduce (P->B) and then pay
    an all-gather back, plus the backward pass's mirror images: Megatron's MLP on a model-only mesh came out
    as 11 collectives where 3 all-reduces do.  So a plan with reduce-scatters is planned again with them
    charged as all-reduces, and the plan whose Boxing costs less per step, forward and backward, is kept.
    """
    args = (nodes, axes, batch, loss, trainable, source_sbp, supports, rounds, several_axes)
    first = _plan(*args)
    if not any(kind == "reduce-scatter" for b in first.boxing for _, kind in b.collectives):
        return first
    second = _plan(*args, whole_partials=True)
    return second if cost(second) < cost(first) else first


def cost(p):
    """What a plan's Boxing costs per step: bytes sent per device plus each collective's latency."""
    return sum(b.bytes_per_step + propagate.LATENCY_BYTES * len(b.collectives) for b in p.boxing)


def _plan(nodes, axes, batch, loss, trainable, source_sbp, supports, rounds, several_axes, whole_partials=False):
    p = Plan(list(axes))

    def fed(shape):   # an unknown (None) dim is the batch: plan with the size actually fed
        return tuple(batch if d is None else d for d in shape)

    consumers = {}
    for node in nodes:
        for i, x in enumerate(node.inputs):
            consumers.setdefault(x, []).append((node, i))
    for round_ in range(rounds):
        changed = False
        for node in nodes:
            if node.op.is_source:
                nd = source_sbp(node, axes, batch) if node.op.kind != "constant" else (broadcast,) * len(axes)
                p.sbp.update({b: nd for b in node.outputs})
                continue
            if getattr(node, "placement", None) is not None:    # placed on some devices: whole on each of them
                p.signatures[node] = (Signature((broadcast,) * len(node.inputs), (broadcast,) * len(node.outputs)),
                                      ) * len(axes)
                p.sbp.update({b: (broadcast,) * len(axes) for b in node.outputs})
                p.wanted.update({(node, i): (broadcast,) * len(axes) for i in range(len(node.inputs))})
                continue
            view = _Node(node, [_View(fed(x.shape), x.dtype, p.sbp[x], bool(x.shape) and x.shape[0] is None,
                                      x.node.op.kind == "variable") for x in node.inputs])
            specs = [(fed(b.shape), b.dtype) for b in node.outputs]
            wants = [[p.wanted[c] for c in consumers.get(b, ()) if c in p.wanted] for b in node.outputs]
            sigs = tuple(propagate.signatures(view, specs, axes, wants if round_ else None, supports,
                                              whole_partials, several_axes))
            changed |= p.signatures.get(node) != sigs
            p.signatures[node] = sigs
            p.sbp.update(zip(node.outputs, propagate.output_sbps(sigs, len(specs))))
            for i, want in enumerate(propagate.input_sbps(sigs, len(node.inputs))):
                p.wanted[(node, i)] = want
        if not changed:
            break
    copied = set()      # (Blob, placement): a Blob crossing to a placement is copied there once, whoever reads it
    for node in nodes:
        p.boxing.extend(_inner(node, p.signatures.get(node, ()), axes, fed))
        for i, x in enumerate(node.inputs):
            if _placement(x.node) != _placement(node):
                if (x, _placement(node)) not in copied:
                    copied.add((x, _placement(node)))
                    p.boxing.append(_transfer(x, node, p.sbp[x], p.wanted[(node, i)], fed(x.shape)))
            elif p.wanted[(node, i)] != p.sbp[x]:
                p.boxing.extend(_moving(_boxing(_label(x.node), node.name, p.sbp[x], p.wanted[(node, i)],
                                                fed(x.shape), x.dtype, axes)))
    if loss is not None:        # (nothing trainable: no Blob carries a gradient, so nothing is added)
        p.boxing.extend(_backward(p, nodes, loss, trainable, fed))
    return p


def _inner(node, sigs, axes, fed):
    """What ``node``'s kernel communicates itself on each axis its signature says so (Signature.collectives)."""
    out, whole = [], (broadcast,) * len(axes)
    for sig, (axis, n) in zip(sigs, axes):
        if sig.collectives and n > 1:
            spec = (fed(node.outputs[0].shape), node.outputs[0].dtype)
            partial = tuple(partial_sum if a == axis else broadcast for a, _ in axes)
            out.append(Boxing(node.name, node.name, partial, whole, tuple((axis, kind) for kind in sig.collectives),
                              propagate.inner_bytes(sig, [spec], n)))
    return out


def _placement(node):
    return getattr(node, "placement", None)


def _devices(placement):
    return "all devices" if placement is None else ",".join(f"0:{d}" for d in placement)


def _transfer(x, node, src, dst, shape, phase="forward"):
    """A Blob crossing from one placement to another: copied whole to each device of the consumer's."""
    where = f"{_devices(_placement(x.node))} -> {_devices(_placement(node))}"
    if phase == "forward":
        return Boxing(_label(x.node), node.name, tuple(src), tuple(dst), ((where, "copy"),),
                      float(boxing.nbytes(shape, x.dtype)), phase)
    back = f"{_devices(_placement(node))} -> {_devices(_placement(x.node))}"
    return Boxing(f"grad of {node.name}", _label(x.node), tuple(dst), tuple(src), ((back, "copy"),),
                  float(boxing.nbytes(shape, x.dtype)), phase)


def _label(node):
    return node.variable.path if node.op.kind == "variable" else node.name


def _boxing(producer, consumer, src, dst, shape, dtype, axes, phase="forward"):
    """Box axis by axis; each collective moves the tensor as split over the other axes (over an axis of one
    device nothing moves: no collective)."""
    size = boxing.nbytes(shape, dtype)
    kinds, total = [], 0.0
    for i, (axis, n) in enumerate(axes):
        if src[i] == dst[i] or n == 1:
            continue
        kinds.append((axis, boxing.collective(src[i], dst[i])))
        local = size
        for j, (_, m) in enumerate(axes):
            if j != i and isinstance(src[j], Split):
                local /= m
        total += boxing.cost(src[i], dst[i], local, n)
    return Boxing(producer, consumer, tuple(src), tuple(dst), tuple(kinds), total, phase)


def _moving(box):
    """``[box]``, or ``[]`` when it has no collective: a plan lists only what communicates or rearranges."""
    return [box] if box.collectives else []


# The backward pass -------------------------------------------------------
def _grad_of_input(sig, i):
    """SBP of the gradient an op with signature ``sig`` returns for input ``i`` (one axis).

    A split input gets a split gradient; a partial-sum input needs the whole
    upstream gradient, so it gets a broadcast one; a broadcast input used to
    compute split or partial outputs gets a partial sum (each device saw a part).
    """
    want = sig.inputs[i]
    if isinstance(want, Split):
        return want
    if want == partial_sum:
        return broadcast
    return partial_sum if any(s != broadcast for s in sig.outputs) else broadcast


def _grad_form(sbp):
    """SBP in which a Blob of SBP ``sbp`` expects its gradient: split stays split, otherwise whole."""
    return sbp if isinstance(sbp, Split) else broadcast


def _backward(p, nodes, loss, trainable, fed):
    ids = {id(v) for v in trainable}
    needs = set()                       # Blobs that carry a gradient: after a trainable variable, before the loss
    for node in nodes:
        if node.op.kind == "variable":
            if id(node.variable) in ids:
                needs.update(node.outputs)
        elif any(x in needs for x in node.inputs):
            needs.update(node.outputs)
    upstream, frontier = {loss}, [loss]
    while frontier:
        blob = frontier.pop()
        for x in blob.node.inputs:
            if x not in upstream:
                upstream.add(x)
                frontier.append(x)
    needs &= upstream
    arriving, out, copied = {}, [], set()   # Blob -> {nd gradient SBP: [consumer names]}; crossings copied back
    for node in nodes:
        sigs = p.signatures.get(node)
        for i, x in enumerate(node.inputs):
            if sigs is None or x not in needs or not x.dtype.is_floating:
                continue
            if _placement(x.node) != _placement(node):      # the gradient crosses back: a copy, not a collective
                if (x, _placement(node)) not in copied:
                    copied.add((x, _placement(node)))
                    out.append(_transfer(x, node, p.sbp[x], p.wanted[(node, i)], fed(x.shape), "backward"))
                continue
            grad = tuple(_grad_of_input(sig, i) for sig in sigs)
            arriving.setdefault(x, {}).setdefault(grad, []).append(node.name)
    for x, forms in arriving.items():
        want = tuple(_grad_form(s) for s in p.sbp[x])
        var = x.node.variable.path if x.node.op.kind == "variable" else None
        for grad, consumers in forms.items():
            if grad != want:
                consumer = f"{var} (optimizer)" if var else _label(x.node)
                out.extend(_moving(_boxing(f"grad of {', '.join(consumers)}", consumer, grad, want, fed(x.shape),
                                           x.dtype, p.axes, phase="backward")))
    return out
