"""The merges Keras adds beside Add and Concatenate: Maximum, Minimum (elementwise over inputs of one shape) and
Dot (Keras' ``batch_dot`` of two inputs along one axis each, optionally of their L2-normalised values), with their
functional forms ``maximum``, ``minimum`` and ``dot``."""
import string

from ..errors import LayerError, ShapeError
from ..ops import elementwise as ew
from ..ops.einsum import einsum
from ..ops.shape import reshape
from .core import _Merge
from .normalization import l2_normalize


class Maximum(_Merge):
    def call(self, inputs):
        return self._fold(inputs, ew.maximum)


class Minimum(_Merge):
    def call(self, inputs):
        return self._fold(inputs, ew.minimum)


class Dot(_Merge):
    """``Dot(axes)([a, b])``: per example, the sum over ``a``'s axis ``axes[0]`` and ``b``'s ``axes[1]`` (an int:
    the same for both) of their products; the output keeps ``a``'s other axes, then ``b``'s, and is ``(N, 1)``
    for two vectors.  ``normalize`` divides each input by its L2 norm along that axis first (cosine similarity)."""

    def __init__(self, axes, normalize=False, **kwargs):
        super().__init__(**kwargs)
        what = f"layer {self.name!r} (Dot)"
        pair = (axes, axes) if isinstance(axes, int) and not isinstance(axes, bool) else axes
        if not (isinstance(pair, (tuple, list)) and len(pair) == 2 and all(
                isinstance(a, int) and not isinstance(a, bool) for a in pair)):
            raise LayerError(f"{what}: axes expected an int or a pair of ints, received {axes!r}")
        if not isinstance(normalize, bool):
            raise LayerError(f"{what}: normalize expected True or False, received {normalize!r}")
        self.axes = list(axes) if isinstance(axes, (tuple, list)) else axes
        self.normalize = normalize

    def call(self, inputs):
        self._check(inputs)
        if len(inputs) != 2:
            raise LayerError(f"layer {self.name!r} (Dot): expected exactly 2 inputs, received {len(inputs)}")
        a, b = inputs
        pair = (self.axes, self.axes) if isinstance(self.axes, int) else self.axes
        ka, kb = pair[0] % a.ndim, pair[1] % b.ndim
        if min(a.ndim, b.ndim) < 2 or 0 in (ka, kb) or a.shape[ka] != b.shape[kb]:
            raise ShapeError(f"layer {self.name!r} (Dot): expected inputs of rank >= 2 with equal sizes on axes "
                             f"{[ka, kb]} (not the batch axis 0), received shapes {a.shape} and {b.shape}")
        if self.normalize:
            a, b = l2_normalize(a, ka), l2_normalize(b, kb)
        letters = iter(c for c in string.ascii_lowercase if c not in "nk")
        ta = ["n"] + [next(letters) for _ in range(a.ndim - 1)]
        tb = ["n"] + [next(letters) for _ in range(b.ndim - 1)]
        ta[ka] = tb[kb] = "k"
        out = "".join(ta[1:ka] + ta[ka + 1:] + tb[1:kb] + tb[kb + 1:])
        y = einsum(f"{''.join(ta)},{''.join(tb)}->n{out}", a, b)
        return reshape(y, (y.shape[0], 1)) if not out else y

    def get_config(self):
        return {**super().get_config(), "axes": self.axes, "normalize": self.normalize}


def maximum(inputs, **kwargs):
    """Keras' functional form of ``Maximum``."""
    return Maximum(**kwargs)(inputs)


def minimum(inputs, **kwargs):
    return Minimum(**kwargs)(inputs)


def dot(inputs, axes=-1, normalize=False, **kwargs):
    return Dot(axes=axes, normalize=normalize, **kwargs)(inputs)
