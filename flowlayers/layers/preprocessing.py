"""Keras' numeric preprocessing layers: Normalization (a mean and variance given, or learnt from data by ``adapt``),
Discretization (values to bucket indices by boundaries given or learnt by ``adapt``) and CategoryEncoding (integer
tokens to one-hot, multi-hot or count vectors).  ``adapt`` reads numpy arrays, or an iterable of batches."""
import numpy as np

from .. import dtypes
from ..errors import InputError, LayerError, ShapeError
from ..ops import elementwise as ew, nn, reduce
from ..ops.shape import reshape
from .base import Layer

EPSILON = 1e-7      # Keras' backend.epsilon(): the smallest standard deviation Normalization divides by


def _batches(data, what):
    """``data`` (an array, or an iterable of arrays) as a list of float arrays."""
    if isinstance(data, np.ndarray):
        batches = [data]
    elif hasattr(data, "__iter__") and not isinstance(data, (str, bytes, dict)):
        batches = [np.asarray(b) for b in data]
    else:
        raise InputError(f"{what}: expected a numpy array or an iterable of them, received {type(data).__name__}")
    if not batches or any(b.size == 0 for b in batches):
        raise InputError(f"{what}: expected data with at least one value, received none")
    if any(not np.issubdtype(b.dtype, np.number) for b in batches):
        raise InputError(f"{what}: expected numbers, received arrays of dtype {[str(b.dtype) for b in batches]}")
    return batches


class Normalization(Layer):
    """``(x - mean) / max(sqrt(variance), 1e-7)`` (``invert``: ``mean + x * max(sqrt(variance), 1e-7)``), with one
    mean and variance per index of the dims in ``axis`` (the others are reduced by ``adapt``).  Given ``mean`` and
    ``variance`` are constants; else they are non-trainable weights ``mean``, ``variance`` (and Keras' ``count``),
    set by ``adapt(data)``."""

    def __init__(self, axis=-1, mean=None, variance=None, invert=False, **kwargs):
        super().__init__(**kwargs)
        self.what = what = f"layer {self.name!r} (Normalization)"
        axis = () if axis is None else (axis,) if isinstance(axis, int) else axis
        if not isinstance(axis, (tuple, list)) or not all(isinstance(a, int) and not isinstance(a, bool)
                                                          for a in axis):
            raise LayerError(f"{what}: axis expected None, an int or a tuple of ints, received {axis!r}")
        if (mean is None) != (variance is None) or (mean is not None and np.shape(mean) != np.shape(variance)):
            raise LayerError(f"{what}: expected mean and variance both given, of one shape, or neither, received "
                             f"mean={mean!r}, variance={variance!r}")
        if mean is not None and np.ndim(mean) > len(axis):
            raise LayerError(f"{what}: mean expected a rank <= {len(axis)} (the number of axes in {tuple(axis)}), "
                             f"received shape {np.shape(mean)}")
        if not isinstance(invert, bool):
            raise LayerError(f"{what}: invert expected True or False, received {invert!r}")
        self.axis, self.invert = tuple(axis), invert
        self.input_mean = None if mean is None else np.asarray(mean, np.float32)
        self.input_variance = None if variance is None else np.asarray(variance, np.float32)

    def build(self, input_shape):
        ndim = len(input_shape)
        if any(not -ndim <= a < ndim for a in self.axis):
            raise ShapeError(f"{self.what}: axis {self.axis} expected axes of an input of rank {ndim}, received "
                             f"shape {input_shape}")
        self.keep = tuple(sorted(a % ndim for a in self.axis))
        if any(input_shape[a] is None for a in self.keep):
            raise ShapeError(f"{self.what}: expected known sizes on axes {self.keep}, received shape {input_shape}")
        self.broadcast = tuple(input_shape[d] if d in self.keep else 1 for d in range(ndim))
        self.input_shape_built = tuple(input_shape)
        if self.input_mean is None:
            shape = tuple(input_shape[d] for d in self.keep)
            self.mean = self.add_weight("mean", shape, "zeros", trainable=False)
            self.variance = self.add_weight("variance", shape, "ones", trainable=False)
            self.count = self.add_weight("count", (), "zeros", dtype="int32", trainable=False)
        self.fix_feature_dims(**{f"axis_{a}": input_shape[a] for a in self.keep})

    def call(self, x):
        if self.input_mean is not None:
            mean = np.broadcast_to(self._expanded(self.input_mean), self.broadcast)
            scale = np.maximum(np.sqrt(np.broadcast_to(self._expanded(self.input_variance), self.broadcast)),
                               np.float32(EPSILON))
            mean, scale = ew.constant(mean, x.dtype), ew.constant(scale, x.dtype)
        else:
            mean = reshape(self.read(self.mean), self.broadcast)
            scale = ew.maximum(ew.sqrt(reshape(self.read(self.variance), self.broadcast)), EPSILON)
        if self.invert:
            return ew.add(mean, ew.multiply(x, scale))
        return ew.divide(ew.subtract(x, mean), scale)

    def _expanded(self, value):
        """A given mean or variance laid along the kept axes (its dims are their last ones), 1 elsewhere."""
        shape = [1] * len(self.broadcast)
        for i in range(1, value.ndim + 1):
            shape[self.keep[-i]] = value.shape[-i]
        return value.reshape(shape)

    def adapt(self, data):
        """Set ``mean`` and ``variance`` to those of ``data`` over every axis not in ``axis``: one array, or an
        iterable of batches (combined as Keras combines them)."""
        what = f"{self.what}.adapt"
        if self.input_mean is not None:
            raise LayerError(f"{what}: the layer was made with a mean and variance; expected one without them")
        batches = _batches(data, what)
        if not self.built:
            self.build((None,) + batches[0].shape[1:])
            self.built = True
        for b in batches:
            if b.ndim != len(self.input_shape_built) or any(b.shape[a] != self.input_shape_built[a]
                                                            for a in self.keep):
                raise ShapeError(f"{what}: expected batches of shape {self.input_shape_built} (sizes fixed on axes "
                                 f"{self.keep}), received {b.shape}")
        reduce_axes = tuple(d for d in range(batches[0].ndim) if d not in self.keep)
        mean, var, total = None, None, 0
        for b in batches:
            count = int(np.prod([b.shape[d] for d in reduce_axes]))
            b_mean, b_var = np.mean(b, axis=reduce_axes), np.var(b, axis=reduce_axes)
            if mean is None:
                mean, var, total = b_mean, b_var, count
                continue
            total += count
            w = count / total               # the batch's share; the pooled variance about the new mean
            new_mean = mean * (1 - w) + b_mean * w
            var = (var + (mean - new_mean) ** 2) * (1 - w) + (b_var + (b_mean - new_mean) ** 2) * w
            mean = new_mean
        self.set_weights([np.asarray(mean, np.float32), np.asarray(var, np.float32), np.int32(0)])

    def get_config(self):
        return {**super().get_config(), "axis": self.axis, "invert": self.invert,
                "mean": None if self.input_mean is None else self.input_mean.tolist(),
                "variance": None if self.input_variance is None else self.input_variance.tolist()}


class _Encoding(Layer):
    """Integer tokens in ``[0, depth)`` as vectors of size ``depth``: 'one_hot' (each token's, a trailing dim of 1
    dropped), 'multi_hot' (1 where a token of the example's ``(N, k)`` occurs) or 'count' (how often)."""
    MODES = ("one_hot", "multi_hot", "count")

    def encode(self, tokens, depth, mode, dtype):
        ids = tokens if tokens.dtype.is_integer else ew.cast(tokens, dtypes.int32)
        if mode == "one_hot":       # a trailing dim of 1 is the token's own
            if ids.ndim > 1 and ids.shape[-1] == 1:
                ids = reshape(ids, ids.shape[:-1])
            return nn.one_hot(ids, depth, dtype=dtype)
        if ids.ndim != 2:
            raise ShapeError(f"layer {self.name!r} ({type(self).__name__}): output_mode {mode!r} expected tokens of "
                             f"shape (N, k), received shape {tokens.shape}")
        hot = nn.one_hot(ids, depth, dtype=dtype)
        return reduce.reduce_max(hot, axis=1) if mode == "multi_hot" else reduce.reduce_sum(hot, axis=1)


class CategoryEncoding(_Encoding):
    def __init__(self, num_tokens=None, output_mode="multi_hot", sparse=False, **kwargs):
        super().__init__(**kwargs)
        self.what = what = f"layer {self.name!r} (CategoryEncoding)"
        output_mode = "multi_hot" if output_mode == "binary" else output_mode
        if output_mode not in self.MODES:
            raise LayerError(f"{what}: output_mode expected one of {list(self.MODES)}, received {output_mode!r}")
        if isinstance(num_tokens, bool) or not isinstance(num_tokens, int) or num_tokens < 1:
            raise LayerError(f"{what}: num_tokens expected a positive int, received {num_tokens!r}")
        if sparse:
            raise LayerError(f"{what}: sparse=True is not supported (flowlayers has no sparse tensors); expected "
                             f"False")
        self.num_tokens, self.output_mode, self.sparse = num_tokens, output_mode, False

    def call(self, inputs, count_weights=None):
        if count_weights is not None:
            raise LayerError(f"{self.what}: count_weights is not supported; expected None")
        return self.encode(inputs, self.num_tokens, self.output_mode, self.dtype)

    def get_config(self):
        return {**super().get_config(), "num_tokens": self.num_tokens, "output_mode": self.output_mode,
                "sparse": False}


class Discretization(_Encoding):
    """Values to bucket indices: ``i`` where ``bin_boundaries[i - 1] <= x < bin_boundaries[i]`` (int32), or
    encoded as CategoryEncoding does ('one_hot', 'multi_hot', 'count').  ``adapt`` sets ``num_bins - 1``
    boundaries at the data's quantiles ``1/num_bins, 2/num_bins, ...``, on its cumulative distribution
    interpolated linearly between the sorted values (Keras' rule): exactly, where Keras' sketch is within
    ``epsilon`` of them (and the same while the data has at most ``1 / epsilon`` values)."""

    def __init__(self, bin_boundaries=None, num_bins=None, epsilon=0.01, output_mode="int", sparse=False,
                 dtype=None, name=None):
        super().__init__(name=name, dtype=dtype)
        self.what = what = f"layer {self.name!r} (Discretization)"
        if (bin_boundaries is None) == (num_bins is None):
            raise LayerError(f"{what}: expected either bin_boundaries or num_bins, received bin_boundaries="
                             f"{bin_boundaries!r} and num_bins={num_bins!r}")
        if num_bins is not None and (isinstance(num_bins, bool) or not isinstance(num_bins, int) or num_bins < 1):
            raise LayerError(f"{what}: num_bins expected a positive int, received {num_bins!r}")
        if bin_boundaries is not None and (np.ndim(bin_boundaries) != 1 or np.any(np.diff(bin_boundaries) < 0)):
            raise LayerError(f"{what}: bin_boundaries expected a sorted list of numbers, received {bin_boundaries!r}")
        if isinstance(epsilon, bool) or not isinstance(epsilon, (int, float)) or not 0 < epsilon < 1:
            raise LayerError(f"{what}: epsilon expected a number in (0, 1), received {epsilon!r}")
        if output_mode not in ("int",) + self.MODES:
            raise LayerError(f"{what}: output_mode expected one of {['int', *self.MODES]}, received {output_mode!r}")
        if sparse:
            raise LayerError(f"{what}: sparse=True is not supported (flowlayers has no sparse tensors); expected "
                             f"False")
        self.bin_boundaries = None if bin_boundaries is None else [float(b) for b in bin_boundaries]
        self.num_bins, self.epsilon, self.output_mode = num_bins, float(epsilon), output_mode

    def adapt(self, data, steps=None):
        """Boundaries at the quantiles of every value of ``data`` (an array or an iterable of batches; ``steps``:
        the first batches only)."""
        what = f"{self.what}.adapt"
        if self.num_bins is None:
            raise LayerError(f"{what}: the layer was made with bin_boundaries; expected one made with num_bins")
        batches = _batches(data, what)[:steps]
        values = np.sort(np.concatenate([b.astype(np.float32).ravel() for b in batches])).astype(np.float64)
        if values.size < self.num_bins:     # fewer values than bins: each value but the last bounds a bin
            self.bin_boundaries = values[:-1].astype(np.float32).tolist()
            return
        cumulative = np.arange(1, values.size + 1) / values.size
        quantiles = np.arange(1, self.num_bins) / self.num_bins
        self.bin_boundaries = np.interp(quantiles, cumulative, values).astype(np.float32).tolist()

    def call(self, x):
        if self.bin_boundaries is None:
            raise LayerError(f"{self.what}: expected boundaries, received none; call adapt(data) first or give "
                             f"bin_boundaries")
        bounds = ew.constant(np.asarray(self.bin_boundaries, np.float32), x.dtype)
        below = ew.cast(ew.greater(bounds, reshape(x, x.shape + (1,))), dtypes.int32)
        index = ew.subtract(len(self.bin_boundaries), reduce.reduce_sum(below, axis=-1))
        if self.output_mode == "int":
            return index
        return self.encode(index, len(self.bin_boundaries) + 1, self.output_mode, dtypes.float32)

    def get_config(self):
        config = {k: v for k, v in super().get_config().items() if k != "trainable"}    # not an argument here
        return {**config, "bin_boundaries": self.bin_boundaries, "num_bins": self.num_bins,
                "epsilon": self.epsilon, "output_mode": self.output_mode, "sparse": False}

    @classmethod
    def from_config(cls, config):
        """Boundaries learnt by ``adapt`` come back with the ``num_bins`` they were learnt for."""
        config = dict(config)
        learnt = config.pop("bin_boundaries") if config.get("num_bins") is not None else None
        layer = cls(**config)
        if learnt is not None:
            layer.bin_boundaries = learnt
        return layer
