"""Ops that move elements without computing: reshape, transpose, concat, pad, and SBP constraints (the static
slice is an indexing op: ``flowlayers/ops/indexing.py``)."""
import math

from .. import sbp as sbp_mod
from ..errors import SBPError, ShapeError, describe_shape
from ..framework.graph import apply
from ..framework.op_def import OpDef, Signature
from ..parallel.propagate import check_nd
from ..sbp import Split as S, broadcast as B, partial_sum as P


def _resolve(in_shape, target):
    target = list(target)
    if target.count(-1) > 1:
        raise ShapeError(f"reshape expected at most one -1 in the target shape, received {tuple(target)}")
    known_in = None if None in in_shape else math.prod(in_shape)
    if -1 in target:
        rest = math.prod(d for d in target if d not in (-1, None))
        i = target.index(-1)
        if known_in is None:
            # (None, ...) -> (None, -1): the batch dim is carried, the rest must be known
            if in_shape[0] is None and None not in in_shape[1:] and target[0] is None:
                target[i] = math.prod(in_shape[1:]) // math.prod(d for d in target[1:] if d != -1)
            else:
                target[i] = None
        elif rest == 0 or known_in % rest:
            raise ShapeError(f"cannot reshape {describe_shape(in_shape)} ({known_in} elements) into {tuple(target)}")
        else:
            target[i] = known_in // rest
    if known_in is not None and None not in target and math.prod(target) != known_in:
        raise ShapeError(f"cannot reshape {describe_shape(in_shape)} ({known_in} elements) into "
                         f"{describe_shape(target)} ({math.prod(target)} elements)")
    return tuple(target)


def _infer_reshape(inputs, attrs):
    return [(_resolve(inputs[0].shape, attrs["shape"]), inputs[0].dtype)]


def _prefixes(shape):
    """Element count before each dim, an unknown (None) batch counted symbolically: {prefix: dim}."""
    out, unknown, known = {}, 0, 1
    for i, d in enumerate(shape):
        out.setdefault((unknown, known), i)
        unknown, known = (unknown + 1, known) if d is None else (unknown, known * d)
    return out


def _reshape_signatures(inputs, attrs):
    """S(k) -> S(j) wherever input dim k and output dim j start at the same element offset: each device's
    contiguous block of dim k is then a contiguous block of dim j (flattening a channel-split NCHW blob
    stays local).  Divisibility of both dims is the planner's check."""
    (x,), out = inputs, _resolve(inputs[0].shape, attrs["shape"])
    starts = _prefixes(out)
    sigs = [Signature((S(k),), (S(starts[p]),)) for p, k in _prefixes(x.shape).items()
            if p in starts and x.shape[k] != 1 and out[starts[p]] != 1]
    return sigs + [Signature((B,), (B,)), Signature((P,), (P,))]


RESHAPE = OpDef("reshape", _infer_reshape, _reshape_signatures)


def reshape(x, shape, name=None):
    """``x`` with a new shape; one entry may be -1. Batch-preserving reshapes stay local under S(0)."""
    shape = tuple(None if d is None else int(d) for d in shape)
    return apply(RESHAPE, [x], {"shape": shape}, name)


def flatten(x, name=None):
    """``(N, ...) -> (N, prod(...))``."""
    return reshape(x, (x.shape[0], -1) if x.shape[0] is not None else (None, -1), name)


def _infer_transpose(inputs, attrs):
    (x,) = inputs
    perm = attrs["perm"]
    if sorted(perm) != list(range(x.ndim)):
        raise ShapeError(f"transpose expected a permutation of {list(range(x.ndim))}, received {list(perm)}")
    return [(tuple(x.shape[p] for p in perm), x.dtype)]


TRANSPOSE = OpDef("transpose", _infer_transpose, lambda inputs, attrs: [
    Signature((S(k),), (S(attrs["perm"].index(k)),)) for k in range(inputs[0].ndim)
] + [Signature((B,), (B,)), Signature((P,), (P,))])


def transpose(x, perm, name=None):
    return apply(TRANSPOSE, [x], {"perm": tuple(perm)}, name)


def _infer_concat(inputs, attrs):
    first = inputs[0]
    axis = attrs["axis"] % first.ndim
    for x in inputs[1:]:
        if x.ndim != first.ndim or any(a != b for i, (a, b) in enumerate(zip(x.shape, first.shape)) if i != axis):
            raise ShapeError(f"concat on axis {axis} expected shapes equal except on that axis, received "
                             + ", ".join(describe_shape(y.shape) for y in inputs))
        if x.dtype != first.dtype:
            raise ShapeError(f"concat expected one dtype, received {[str(y.dtype) for y in inputs]}")
    sizes = [x.shape[axis] for x in inputs]
    total = None if None in sizes else sum(sizes)
    return [(first.shape[:axis] + (total,) + first.shape[axis + 1:], first.dtype)]


def _concat_signatures(inputs, attrs):
    n, axis = len(inputs), attrs["axis"] % inputs[0].ndim
    return ([Signature((S(k),) * n, (S(k),)) for k in range(inputs[0].ndim) if k != axis]
            + [Signature((B,) * n, (B,)), Signature((P,) * n, (P,))])


CONCAT = OpDef("concat", _infer_concat, _concat_signatures)


def concat(inputs, axis=-1, name=None):
    inputs = list(inputs)
    if not inputs:
        raise ShapeError("concat expected at least one Blob, received none")
    return apply(CONCAT, inputs, {"axis": axis % inputs[0].ndim}, name)


def _infer_pad(inputs, attrs):
    (x,), paddings = inputs, attrs["paddings"]
    if len(paddings) != x.ndim:
        raise ShapeError(f"pad expected one (before, after) pair per dim of the input of shape "
                         f"{describe_shape(x.shape)}, received {paddings}")
    return [(tuple(None if d is None else d + a + b for d, (a, b) in zip(x.shape, paddings)), x.dtype)]


def _pad_signatures(inputs, attrs):
    """Split along any dim that is not padded; zeros padded onto a partial sum keep it one (pad is linear)."""
    whole = [k for k, (a, b) in enumerate(attrs["paddings"]) if a == b == 0]
    return [Signature((S(k),), (S(k),)) for k in whole] + [Signature((B,), (B,)), Signature((P,), (P,))]


PAD = OpDef("pad", _infer_pad, _pad_signatures)


def pad(x, paddings, name=None):
    """Zeros around ``x``: ``paddings`` holds one ``(before, after)`` pair of counts per dim."""
    pairs = tuple((int(a), int(b)) for a, b in paddings)
    if any(a < 0 or b < 0 for a, b in pairs):
        raise ShapeError(f"pad expected counts >= 0, received {list(paddings)}")
    return apply(PAD, [x], {"paddings": pairs}, name)


SBP_CONSTRAINT = OpDef("sbp_constraint", lambda inputs, attrs: [(inputs[0].shape, inputs[0].dtype)],
                       lambda inputs, attrs: [Signature((attrs["sbp"][0],), (attrs["sbp"][0],))], kind="constraint")


def sbp_constraint(x, nd_sbp, axes, several_axes=False, backend="the backend"):
    """Identity on values; pins ``x`` to ``nd_sbp`` so Boxing converts to it (``Blob.with_sbp``).  ``axes``: the
    mesh ``[(name, size), ...]`` it is built for (None: the mirrored view, which has no SBP); ``several_axes``:
    whether ``backend`` can split one tensor dim over several of them."""
    what = f"Blob {x.name!r}.with_sbp"
    if axes is None:
        raise SBPError(f"{what}(...): SBP constraints exist in the consistent view only; the view in force is "
                       f"mirrored; drop the constraint or build the model in flow.config.set_view('consistent')")
    nd_sbp = tuple(nd_sbp[0]) if len(nd_sbp) == 1 and isinstance(nd_sbp[0], (tuple, list)) else tuple(nd_sbp)
    if len(nd_sbp) != len(axes) or not all(sbp_mod.is_sbp(s) for s in nd_sbp):
        raise SBPError(f"{what}: expected {len(axes)} SBP value(s), one per mesh axis {[a for a, _ in axes]}, "
                       f"received {nd_sbp!r}; pass one flow.sbp value (split(k), broadcast, partial_sum) per axis")
    for s, (axis_name, n) in zip(nd_sbp, axes):
        if isinstance(s, S) and s.axis >= x.ndim:
            raise SBPError(f"{what}: {s!r} on mesh axis {axis_name!r} expected a tensor axis in [0, {x.ndim}) of "
                           f"shape {describe_shape(x.shape)}, received axis {s.axis}; split one of the Blob's dims")
        if isinstance(s, S) and x.shape[s.axis] is not None and x.shape[s.axis] % n:
            raise SBPError(f"{what}: {s!r} on mesh axis {axis_name!r} of size {n} expected a dim whose size divides "
                           f"by {n}, received dim {s.axis} of size {x.shape[s.axis]} in shape "
                           f"{describe_shape(x.shape)}; split a dim that divides, or broadcast on that axis")
    check_nd(nd_sbp, x.shape, what, several_axes, backend)
    for dim in {s.axis for s in nd_sbp if isinstance(s, S)}:
        n = math.prod(size for s, (_, size) in zip(nd_sbp, axes) if s == S(dim))
        if x.shape[dim] is not None and x.shape[dim] % n:
            raise SBPError(f"{what}: splitting dim {dim} of size {x.shape[dim]} over {n} devices (mesh axes "
                           f"{[a for s, (a, _) in zip(nd_sbp, axes) if s == S(dim)]}) expected a size that divides "
                           f"by {n}, received {x.shape[dim]}; split fewer axes there")
    return apply(SBP_CONSTRAINT, [x], {"sbp": nd_sbp})
