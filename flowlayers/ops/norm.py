"""Normalisation ops: batch_norm (with moving statistics) and layer_norm."""
from ..errors import ShapeError, describe_shape
from ..framework.graph import apply
from ..framework.op_def import OpDef, Signature
from ..sbp import Split as S, broadcast as B


def _check_params(x, params, axes):
    want = tuple(x.shape[a] for a in axes)
    for p in params:
        if p.shape != want:
            raise ShapeError(f"expected parameters of shape {describe_shape(want)} for axes {list(axes)} of input "
                             f"{describe_shape(x.shape)}, received {describe_shape(p.shape)}")


def _infer_batch_norm(inputs, attrs):
    x, *params = inputs
    axis = attrs["axis"]
    _check_params(x, params, (axis,))
    stat = ((x.shape[axis],), x.dtype)
    return [(x.shape, x.dtype), stat, stat]


def _batch_norm_signatures(inputs, attrs):
    x, axis = inputs[0], attrs["axis"]
    n_params = len(inputs) - 1
    sigs = [Signature((S(k),) + (B,) * n_params, (S(k), B, B)) for k in range(x.ndim) if k != axis]
    sigs.append(Signature((S(axis),) + (S(0),) * n_params, (S(axis), S(0), S(0))))
    return sigs + [Signature((B,) * len(inputs), (B, B, B))]


BATCH_NORM = OpDef("batch_norm", _infer_batch_norm, _batch_norm_signatures)


def batch_norm(x, gamma, beta, moving_mean, moving_variance, axis, momentum=0.99, epsilon=1e-3,
               training=None, name=None):
    """Normalise over every axis but ``axis``; returns ``(y, new_moving_mean, new_moving_variance)``.

    While training, batch statistics normalise and the moving statistics move by
    ``momentum``; otherwise the moving statistics normalise and are returned as is.
    """
    attrs = {"axis": axis % x.ndim, "momentum": float(momentum), "epsilon": float(epsilon), "training": training}
    return apply(BATCH_NORM, [x, gamma, beta, moving_mean, moving_variance], attrs, name)


def _infer_layer_norm(inputs, attrs):
    x, *params = inputs
    _check_params(x, params, attrs["axes"])
    return [(x.shape, x.dtype)]


def _layer_norm_signatures(inputs, attrs):
    x = inputs[0]
    n_params = len(inputs) - 1
    return ([Signature((S(k),) + (B,) * n_params, (S(k),)) for k in range(x.ndim) if k not in attrs["axes"]]
            + [Signature((B,) * len(inputs), (B,))])


LAYER_NORM = OpDef("layer_norm", _infer_layer_norm, _layer_norm_signatures)


def layer_norm(x, gamma, beta, axes=(-1,), epsilon=1e-3, name=None):
    """Normalise over ``axes`` of each example, then scale by ``gamma`` and shift by ``beta``."""
    axes = tuple(sorted(a % x.ndim for a in axes))
    return apply(LAYER_NORM, [x, gamma, beta], {"axes": axes, "epsilon": float(epsilon)}, name)
