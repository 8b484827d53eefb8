"""Nodes of the logical graph and the one function that adds them: ``apply``.

A graph is whatever is reachable from some output Blobs; there is no global
graph object.  ``apply`` runs the op's shape/dtype inference at build time,
so mistakes surface where the user wrote them, named after the layer or op.
"""
import contextlib
import itertools

from ..errors import FlowLayersError, GraphError
from . import naming
from .blob import Blob

_layer_stack = []


_made = [0]     # nodes made so far


def next_serial():
    """The serial the next node made will have."""
    return _made[0]


class Node:
    """One op in a graph.  ``attrs`` holds the op's own parameters only (what its OpDef and kernel read); what
    the graph says about the node is in typed fields."""
    __slots__ = ("op", "inputs", "attrs", "name", "outputs", "layer", "placement", "recompute", "variable",
                 "updates", "signature", "serial")

    def __init__(self, op, inputs, attrs, name, layer, placement=None, recompute=None, variable=None):
        self.op, self.inputs, self.attrs, self.name, self.layer = op, tuple(inputs), attrs, name, layer
        self.placement = placement      # device indices of a placement on a subset of the devices, or None: all
        self.recompute = recompute      # the recomputed segment it belongs to (flow.recompute), or None
        self.variable = variable        # a variable op's Variable
        self.updates = {}               # output index -> the Variable a training step assigns it to (moving stats)
        self.signature = None           # per mesh axis, a Signature the planner must use (force_signature)
        self.outputs = ()
        self.serial = _made[0]          # the order nodes are made in (a traced step's stages read it)
        _made[0] += 1

    def __repr__(self):
        return f"Node({self.op.name}, name={self.name!r})"


@contextlib.contextmanager
def _pushed(stack, value):
    """``value`` on top of ``stack`` while the ``with`` block runs: what the ops made inside read."""
    stack.append(value)
    try:
        yield
    finally:
        stack.pop()


def _top(stack):
    return stack[-1] if stack else None


def layer_scope(layer):
    """Ops applied inside are attributed to ``layer`` (in errors, in the plan, in ``Model.layers``)."""
    return _pushed(_layer_stack, layer)


def current_layer():
    return _top(_layer_stack)


_placement_stack = []


def placement_scope(devices):
    """Ops (and variables) made inside run on ``devices`` (a tuple of device indices), not on every device."""
    return _pushed(_placement_stack, devices)


def current_placement():
    return _top(_placement_stack)


_recompute_stack = []
_segments = itertools.count(1)


def recompute_scope(segment=None):
    """Ops made inside form one segment whose activations a training step does not keep: its backward pass
    computes them again from the segment's inputs.  A scope inside another joins it; ``segment`` (an int) names
    the segment, where a saved model is rebuilt."""
    return _pushed(_recompute_stack, _top(_recompute_stack) or segment or new_segment())


def new_segment():
    return next(_segments)


def current_recompute():
    return _top(_recompute_stack)


_revision = [0]     # changes whenever a built node is changed (a forced signature): plans made before are stale


def revision():
    return _revision[0]


def force_signature(node, per_axis):
    """Make the planner give ``node`` the signatures ``per_axis`` (one per mesh axis) instead of the cheapest."""
    node.signature = tuple(per_axis)
    _revision[0] += 1


_tensor_likes = {}     # a type whose values stand for a Blob (a Variable) -> the function giving that Blob


def register_tensor_like(cls, to_blob):
    """Let values of ``cls`` stand wherever a Blob does: an op given one reads ``to_blob(value)`` (a Variable: the
    Blob reading it in the graph being built)."""
    _tensor_likes[cls] = to_blob


def is_tensor(x):
    """Whether ``x`` is a Blob or stands for one."""
    return isinstance(x, Blob) or isinstance(x, tuple(_tensor_likes))


def as_blob(x):
    """``x`` as a Blob where it is one or stands for one, else ``x`` unchanged."""
    if isinstance(x, Blob):
        return x
    for cls, to_blob in _tensor_likes.items():
        if isinstance(x, cls):
            return to_blob(x)
    return x


def apply(op, inputs, attrs=None, name=None, variable=None):
    """Add one node of OpDef ``op`` (``variable``: the Variable a variable op reads); returns its Blob, or a tuple
    for several outputs.  An input that stands for a Blob (a Variable) is read as one."""
    attrs = dict(attrs or {})
    inputs = [as_blob(x) for x in inputs]
    for i, x in enumerate(inputs):
        if not isinstance(x, Blob):
            raise GraphError(f"op {op.name!r}: input {i} expected a Blob, received {type(x).__name__} {x!r}")
    layer = current_layer()
    name = name or naming.unique_name(f"{layer.name}/{op.name}" if layer else op.name)
    try:
        specs = op.infer(inputs, attrs)
    except FlowLayersError as e:
        who = f"layer {layer.name!r}" if layer else f"op {name!r}"
        raise type(e)(f"{who}: {e}") from None
    placement = variable.placement if op.kind == "variable" else \
        None if op.kind == "placeholder" else current_placement()       # inputs are fed to every device
    fed_or_held = op.kind in ("variable", "placeholder")
    node = Node(op, inputs, attrs, name, layer, placement, None if fed_or_held else current_recompute(), variable)
    node.outputs = tuple(Blob(node, i, s, d) for i, (s, d) in enumerate(specs))
    return node.outputs[0] if len(node.outputs) == 1 else node.outputs


class Call:
    """One call of a layer or model on Blobs, kept on the Blobs it returned: what a whole-model save writes
    (the op nodes between ``inputs`` and ``outputs`` are rebuilt by calling ``owner`` again)."""
    __slots__ = ("owner", "inputs", "kwargs", "outputs")

    def __init__(self, owner, inputs, kwargs, outputs):
        self.owner, self.inputs, self.kwargs, self.outputs = owner, inputs, kwargs, outputs


def record_call(owner, inputs, kwargs, outputs):
    """Mark ``outputs`` (a Blob, or a list/tuple/dict of them) as returned by ``owner`` called on ``inputs``.
    An output that is one of the inputs (an identity call) keeps what made it."""
    flat = list(outputs.values()) if isinstance(outputs, dict) else \
        list(outputs) if isinstance(outputs, (list, tuple)) else [outputs]
    given = {id(b) for b in (inputs if isinstance(inputs, (list, tuple)) else [inputs])}
    call = Call(owner, inputs, dict(kwargs), flat)
    for i, blob in enumerate(flat):
        if isinstance(blob, Blob) and id(blob) not in given:
            blob.call = (call, i)
    return outputs


def unit_of(blob):
    """What made ``blob`` as its model sees it: the layer or model call that returned it, else its op node; with
    ``blob``'s index among that unit's outputs."""
    return blob.call if blob.call is not None else (blob.node, blob.index)


def unit_inputs(unit):
    if isinstance(unit, Call):
        return list(unit.inputs) if isinstance(unit.inputs, (list, tuple)) else [unit.inputs]
    return list(unit.inputs)


def units(outputs):
    """The calls and op nodes ``outputs`` need, each after those it reads (a layer's own ops are inside its
    call)."""
    return _producers_first([unit_of(b)[0] for b in outputs], lambda u: [unit_of(x)[0] for x in unit_inputs(u)])


def recompute_units(nodes):
    """``nodes`` (producers first) with each recomputed segment (nodes of one ``recompute_scope`` and placement)
    gathered into one list, producers still first: a segment reads only what existed when its scope opened, so
    it can run whole at one point."""
    def key(node):
        return None if node.recompute is None else (node.recompute, node.placement)

    groups = {}
    for node in nodes:
        if key(node) is not None:
            groups.setdefault(key(node), []).append(node)
    if not groups:
        return list(nodes)
    unit = {id(n): groups[key(n)] if key(n) is not None else n for n in nodes}
    return _producers_first([unit[id(n)] for n in nodes], lambda u: [
        unit[id(x.node)] for n in (u if isinstance(u, list) else [u]) for x in n.inputs
        if id(x.node) in unit and unit[id(x.node)] is not u])


def topo_sort(outputs):
    """Nodes needed for ``outputs``, producers before consumers."""
    return _producers_first([b.node for b in outputs], lambda node: [x.node for x in node.inputs])


def _producers_first(roots, producers):
    """``roots`` and all they need, each after its ``producers(item)`` (iterative: deep models are fine)."""
    order, seen = [], set()
    stack = [(item, False) for item in reversed(roots)]
    while stack:
        item, expanded = stack.pop()
        if id(item) in seen:
            continue
        if expanded:
            seen.add(id(item))
            order.append(item)
            continue
        stack.append((item, True))
        stack.extend((p, False) for p in reversed(producers(item)) if id(p) not in seen)
    return order
