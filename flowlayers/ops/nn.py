"""Neural-network ops: softmax, cross-entropies, dropout, gaussian noise."""
from .. import dtypes
from ..errors import DTypeError, LayerError, ShapeError, describe_shape
from ..framework.graph import apply
from ..framework.op_def import OpDef, Signature
from ..sbp import Split as S, broadcast as B
from . import rules


def _infer_softmax(inputs, attrs):
    (x,) = inputs
    if not x.dtype.is_floating:
        raise DTypeError(f"softmax expected floating logits, received dtype {x.dtype}")
    return [(x.shape, x.dtype)]


def _softmax_signatures(inputs, attrs):
    x = inputs[0]
    axis = attrs["axis"] % x.ndim
    return [Signature((S(k),), (S(k),)) for k in range(x.ndim) if k != axis] + [Signature((B,), (B,))]


SOFTMAX = OpDef("softmax", _infer_softmax, _softmax_signatures)
LOG_SOFTMAX = OpDef("log_softmax", _infer_softmax, _softmax_signatures)


def softmax(logits, axis=-1, name=None):
    return apply(SOFTMAX, [logits], {"axis": axis % logits.ndim}, name)


def log_softmax(logits, axis=-1, name=None):
    return apply(LOG_SOFTMAX, [logits], {"axis": axis % logits.ndim}, name)


def _infer_sparse_ce(inputs, attrs):
    labels, logits = inputs
    if not labels.dtype.is_integer:
        raise DTypeError(f"expected integer class labels, received labels of dtype {labels.dtype}")
    if not logits.dtype.is_floating:
        raise DTypeError(f"expected floating logits, received dtype {logits.dtype}")
    if logits.ndim < 1 or labels.shape != logits.shape[:-1]:
        raise ShapeError(f"expected labels of shape {describe_shape(logits.shape[:-1])} for logits "
                         f"{describe_shape(logits.shape)}, received labels {describe_shape(labels.shape)}")
    return [(labels.shape, logits.dtype)]


def _ce_signatures(inputs, attrs):
    """Rows split with their labels; or the classes split (the vocabulary-parallel loss, labels whole): the kernel
    reduces each row's max, sum of exponentials and label's logit over the devices, never the logits."""
    labels, logits = inputs
    return ([Signature((S(k), S(k)), (S(k),)) for k in range(labels.ndim)] + [Signature((B, B), (B,))]
            + [Signature((B, S(logits.ndim - 1)), (B,), ("all-reduce (max)", "all-reduce", "all-reduce"))])


SPARSE_SOFTMAX_CE = OpDef("sparse_softmax_cross_entropy", _infer_sparse_ce, _ce_signatures)


def sparse_softmax_cross_entropy_with_logits(labels, logits, name=None):
    """Per-example ``-log softmax(logits)[label]``; labels must lie in ``[0, classes)``."""
    return apply(SPARSE_SOFTMAX_CE, [labels, logits], {}, name)


def _infer_dense_ce(inputs, attrs):
    labels, logits = inputs
    if labels.shape != logits.shape or labels.dtype != logits.dtype:
        raise ShapeError(f"expected labels like the logits {describe_shape(logits.shape)} {logits.dtype}, received "
                         f"{describe_shape(labels.shape)} {labels.dtype}")
    return [(logits.shape[:-1] if attrs["reduce_last"] else logits.shape, logits.dtype)]


def _dense_ce_signatures(inputs, attrs):
    x = inputs[1]
    keep = range(x.ndim - 1) if attrs["reduce_last"] else range(x.ndim)
    return [Signature((S(k), S(k)), (S(k),)) for k in keep] + [Signature((B, B), (B,))]


SOFTMAX_CE = OpDef("softmax_cross_entropy", _infer_dense_ce, _dense_ce_signatures)
SIGMOID_CE = OpDef("sigmoid_cross_entropy", _infer_dense_ce, _dense_ce_signatures)


def softmax_cross_entropy_with_logits(labels, logits, name=None):
    """Per-example cross-entropy against one-hot or soft ``labels`` of the logits' shape."""
    return apply(SOFTMAX_CE, [labels, logits], {"reduce_last": True}, name)


def sigmoid_cross_entropy_with_logits(labels, logits, name=None):
    """Elementwise binary cross-entropy of ``sigmoid(logits)`` against ``labels`` in [0, 1]."""
    return apply(SIGMOID_CE, [labels, logits], {"reduce_last": False}, name)


def _infer_dropout(inputs, attrs):
    if not 0.0 <= attrs["rate"] < 1.0:
        raise LayerError(f"dropout expected a rate in [0, 1), received {attrs['rate']!r}")
    return [(inputs[0].shape, inputs[0].dtype)]


DROPOUT = OpDef("dropout", _infer_dropout, lambda inputs, attrs: rules.pointwise(inputs, inputs[0].shape))


def dropout(x, rate, training=True, name=None, seed=None, noise_shape=None):
    """Zero each element with probability ``rate`` and scale the rest by ``1/(1-rate)`` while training.

    ``training``: True (always, as in OneFlow job functions), False (never), or
    None (follow the step: on in ``fit``, off in ``evaluate``/``predict``).
    ``noise_shape`` (Keras'): the mask's shape, 1 where one draw serves the whole dim (SpatialDropout's
    ``(N, 1, C)``), None where it is ``x``'s.
    """
    attrs = {"rate": float(rate), "training": training, "seed": seed}
    if noise_shape is not None:
        attrs["noise_shape"] = _noise_shape(x, noise_shape)
    return apply(DROPOUT, [x], attrs, name)


def _noise_shape(x, noise_shape):
    shape = tuple(noise_shape) if isinstance(noise_shape, (tuple, list)) else None
    if shape is None or len(shape) != x.ndim or any(d not in (None, 1) and d != x.shape[i]
                                                    for i, d in enumerate(shape)):
        raise ShapeError(f"dropout expected a noise_shape of rank {x.ndim} holding, per dim, 1, None or the "
                         f"input's size ({describe_shape(x.shape)}), received {noise_shape!r}")
    return tuple(None if d is None or d == x.shape[i] and d != 1 else 1 for i, d in enumerate(shape))


def _infer_noise(inputs, attrs):
    if attrs["stddev"] < 0:
        raise LayerError(f"gaussian_noise expected a stddev >= 0, received {attrs['stddev']!r}")
    if not inputs[0].dtype.is_floating:
        raise DTypeError(f"gaussian_noise expected a floating input, received dtype {inputs[0].dtype}")
    return [(inputs[0].shape, inputs[0].dtype)]


GAUSSIAN_NOISE = OpDef("gaussian_noise", _infer_noise, lambda inputs, attrs: rules.pointwise(inputs,
                                                                                             inputs[0].shape))


def gaussian_noise(x, stddev, multiplicative=False, training=True, seed=None, name=None):
    """While training, ``x + stddev * z`` (Keras' GaussianNoise), or ``x * (1 + stddev * z)`` with
    ``multiplicative`` (GaussianDropout), ``z`` drawn from N(0, 1) per element as dropout draws its mask;
    otherwise ``x``.  ``training`` as for ``dropout``."""
    return apply(GAUSSIAN_NOISE, [x], {"stddev": float(stddev), "multiplicative": bool(multiplicative),
                                       "training": training, "seed": seed}, name)


def one_hot(indices, depth, dtype=dtypes.float32, name=None):
    return apply(ONE_HOT, [indices], {"depth": int(depth), "dtype": dtypes.as_dtype(dtype)}, name)


ONE_HOT = OpDef("one_hot", lambda inputs, attrs: [(inputs[0].shape + (attrs["depth"],), attrs["dtype"])],
                lambda inputs, attrs: [Signature((S(k),), (S(k),)) for k in range(inputs[0].ndim)]
                + [Signature((B,), (B,))])
