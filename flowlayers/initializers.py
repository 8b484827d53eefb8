"""Initializers as specs: each resolves, for a variable's shape, to one of four samplers
the backend draws with stateless random ops (so every view draws the same numbers); one no sampler draws
(``Orthogonal``) makes its value on the host instead, from the variable's seed (``host_value``).  A random
initializer given Keras' ``seed=`` (an int) draws on the host from that seed alone: the same values for every
variable it makes, in every view, device count and engine, as a seeded Keras initializer repeats its values.

Keras names and OneFlow's ``flow.truncated_normal(0.1)``-style factories both work.
"""
import inspect
import math

import numpy as np

from . import missing
from .errors import LayerError


class Initializer:
    """``sampler(shape) -> (kind, params)``; kind is constant, uniform, normal or truncated_normal."""

    def sampler(self, shape):
        raise NotImplementedError

    def host_value(self, shape, seed):
        """The initial value as a numpy array made on the host from ``seed`` (two ints), for an initializer that
        no sampler draws or that has a seed of its own; None: the backend draws it from ``sampler``."""
        if getattr(self, "seed", None) is None:
            return None
        return _host_draw(*self.sampler(shape), shape, np.random.default_rng([int(self.seed)]))

    def _keep_seed(self, seed):
        """Keras' ``seed`` argument: an int, kept (and in the config) where given."""
        if seed is None:
            return
        if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)):
            raise LayerError(f"{type(self).__name__}: seed expected None or an int, received {seed!r}")
        self.seed = int(seed)

    def get_config(self):
        return dict(vars(self))

    def __repr__(self):
        args = ", ".join(f"{k}={v!r}" for k, v in self.get_config().items())
        return f"{type(self).__name__}({args})"


def _host_draw(kind, params, shape, rng):
    """A sampler's numbers drawn with numpy: ``truncated_normal`` redraws values beyond two standard deviations."""
    if kind == "constant":
        return np.full(shape, params["value"])
    if kind == "uniform":
        return rng.uniform(params["minval"], params["maxval"], shape)
    values = rng.standard_normal(shape)
    while kind == "truncated_normal" and np.any(far := np.abs(values) > 2.0):
        values[far] = rng.standard_normal(int(far.sum()))
    return params["mean"] + params["stddev"] * values


class Constant(Initializer):
    def __init__(self, value=0.0):
        self.value = float(value)

    def sampler(self, shape):
        return "constant", {"value": self.value}


class Zeros(Constant):
    def __init__(self):
        super().__init__(0.0)


class Ones(Constant):
    def __init__(self):
        super().__init__(1.0)


class RandomUniform(Initializer):
    def __init__(self, minval=-0.05, maxval=0.05, seed=None):
        self.minval, self.maxval = float(minval), float(maxval)
        self._keep_seed(seed)

    def sampler(self, shape):
        return "uniform", {"minval": self.minval, "maxval": self.maxval}


class RandomNormal(Initializer):
    def __init__(self, mean=0.0, stddev=0.05, seed=None):
        self.mean, self.stddev = float(mean), float(stddev)
        self._keep_seed(seed)

    def sampler(self, shape):
        return "normal", {"mean": self.mean, "stddev": self.stddev}


class TruncatedNormal(RandomNormal):
    """Normal values re-drawn beyond two standard deviations."""

    def sampler(self, shape):
        return "truncated_normal", {"mean": self.mean, "stddev": self.stddev}


def fans(shape, input_axes=None, output_axes=None):
    """(fan_in, fan_out) as Keras computes them: the products of the dims at ``input_axes`` and ``output_axes``
    where both are given (an EinsumDense kernel, Keras 3.15), else a kernel read as (in, out) or (kh, kw, in, out)."""
    if input_axes is not None and output_axes is not None:
        return math.prod(shape[a] for a in input_axes), math.prod(shape[a] for a in output_axes)
    if len(shape) < 1:
        return 1, 1
    if len(shape) == 1:
        return shape[0], shape[0]
    receptive = math.prod(shape[:-2])
    return shape[-2] * receptive, shape[-1] * receptive


class VarianceScaling(Initializer):
    """Keras 3's VarianceScaling: values of variance ``scale / fan`` (``mode``: fan_in, fan_out or their mean).
    ``input_axes`` and ``output_axes`` (both or neither) name the kernel dims whose sizes multiply to the fans;
    EinsumDense and MultiHeadAttention give them from their equations where they are unset, as Keras 3.15 does."""

    def __init__(self, scale=1.0, mode="fan_in", distribution="truncated_normal", seed=None, input_axes=None,
                 output_axes=None):
        if mode not in ("fan_in", "fan_out", "fan_avg"):
            raise LayerError(f"VarianceScaling: mode expected fan_in, fan_out or fan_avg, received {mode!r}")
        distribution = "truncated_normal" if distribution == "normal" else distribution    # Keras' alias
        if distribution not in ("truncated_normal", "untruncated_normal", "uniform"):
            raise LayerError(f"VarianceScaling: distribution expected truncated_normal, untruncated_normal, normal "
                             f"or uniform, received {distribution!r}")
        if not float(scale) > 0:
            raise LayerError(f"VarianceScaling: scale expected a positive float, received {scale!r}")
        self.scale, self.mode, self.distribution = float(scale), mode, distribution
        self.input_axes, self.output_axes = _axes(input_axes, output_axes, type(self).__name__)
        self._keep_seed(seed)

    def get_config(self):
        config = dict(vars(self))
        if self.input_axes is None:
            del config["input_axes"], config["output_axes"]
        return config

    def with_axes(self, input_axes, output_axes):
        """This initializer with the fans read from ``input_axes`` and ``output_axes``, where it has none of its
        own (the seed kept)."""
        if self.input_axes is not None:
            return self
        config = {k: v for k, v in self.get_config().items()
                  if k in inspect.signature(type(self)).parameters}
        return type(self)(**{**config, "input_axes": list(input_axes), "output_axes": list(output_axes)})

    def sampler(self, shape):
        for axis in (self.input_axes or []) + (self.output_axes or []):
            if not -len(shape) <= axis < len(shape):
                raise LayerError(f"{type(self).__name__}: input_axes {self.input_axes} and output_axes "
                                 f"{self.output_axes} expected axes of the variable's shape {tuple(shape)}, "
                                 f"received axis {axis}")
        fan_in, fan_out = fans(shape, self.input_axes, self.output_axes)
        fan = {"fan_in": fan_in, "fan_out": fan_out, "fan_avg": (fan_in + fan_out) / 2}[self.mode]
        var = self.scale / max(1.0, fan)
        if self.distribution == "uniform":
            limit = math.sqrt(3.0 * var)
            return "uniform", {"minval": -limit, "maxval": limit}
        if self.distribution == "untruncated_normal":
            return "normal", {"mean": 0.0, "stddev": math.sqrt(var)}
        # std of a unit normal truncated at +-2 is .8796; Keras corrects for it the same way
        return "truncated_normal", {"mean": 0.0, "stddev": math.sqrt(var) / 0.87962566103423978}


def _axes(input_axes, output_axes, who):
    """Keras' ``input_axes``/``output_axes`` as lists of ints, both or neither."""
    if (input_axes is None) != (output_axes is None):
        raise LayerError(f"{who}: input_axes and output_axes expected both or neither (the fans come from both), "
                         f"received input_axes={input_axes!r}, output_axes={output_axes!r}")
    if input_axes is None:
        return None, None
    for name, axes in (("input_axes", input_axes), ("output_axes", output_axes)):
        if not isinstance(axes, (list, tuple)) or not all(isinstance(a, int) and not isinstance(a, bool)
                                                          for a in axes):
            raise LayerError(f"{who}: {name} expected a list of ints (kernel dims), received {axes!r}")
    return list(input_axes), list(output_axes)


class GlorotUniform(VarianceScaling):
    def __init__(self, seed=None, input_axes=None, output_axes=None):
        super().__init__(1.0, "fan_avg", "uniform", seed, input_axes, output_axes)


class GlorotNormal(VarianceScaling):
    def __init__(self, seed=None, input_axes=None, output_axes=None):
        super().__init__(1.0, "fan_avg", "truncated_normal", seed, input_axes, output_axes)


class HeUniform(VarianceScaling):
    def __init__(self, seed=None, input_axes=None, output_axes=None):
        super().__init__(2.0, "fan_in", "uniform", seed, input_axes, output_axes)


class HeNormal(VarianceScaling):
    def __init__(self, seed=None, input_axes=None, output_axes=None):
        super().__init__(2.0, "fan_in", "truncated_normal", seed, input_axes, output_axes)


class LecunNormal(VarianceScaling):
    def __init__(self, seed=None, input_axes=None, output_axes=None):
        super().__init__(1.0, "fan_in", "truncated_normal", seed, input_axes, output_axes)


class LecunUniform(VarianceScaling):
    def __init__(self, seed=None, input_axes=None, output_axes=None):
        super().__init__(1.0, "fan_in", "uniform", seed, input_axes, output_axes)


class Identity(Initializer):
    """Keras' ``Identity(gain=1.0)``: ``gain`` times the identity matrix of a 2-D shape (rectangular: ones on the
    main diagonal).  Made on the host, the same in every view."""

    def __init__(self, gain=1.0):
        self.gain = float(gain)

    def sampler(self, shape):
        _two_dimensional(shape)
        return "constant", {"value": 0.0}       # stands for it in a VariableSpec; ``host_value`` is always given

    def host_value(self, shape, seed):
        rows, cols = _two_dimensional(shape)
        return self.gain * np.eye(rows, cols)


def _two_dimensional(shape):
    if len(shape) != 2:
        raise LayerError(f"Identity initializer: expected a 2-D shape (a matrix), received shape {tuple(shape)}")
    return shape


class Orthogonal(Initializer):
    """Keras' ``Orthogonal(gain=1.0, seed=None)``: the Q of a normal matrix's QR decomposition (signs made unique by
    R's diagonal) times ``gain``, of the shape ``(prod(shape[:-1]), shape[-1])``.  Made on the host, from ``seed``
    where given, else from the variable's own seed: the same numbers in every view, device count and engine."""

    def __init__(self, gain=1.0, seed=None):
        self.gain, self.seed = float(gain), seed

    def sampler(self, shape):
        return "constant", {"value": 0.0}       # stands for it in a VariableSpec; ``host_value`` is always given

    def host_value(self, shape, seed):
        rows, cols = math.prod(shape[:-1]), shape[-1] if shape else 1
        rng = np.random.default_rng(list(seed) if self.seed is None else [int(self.seed)])
        normal = rng.standard_normal((max(rows, cols), min(rows, cols)))
        q, r = np.linalg.qr(normal)
        q = q * np.sign(np.diag(r))
        return (self.gain * (q if rows >= cols else q.T)).reshape(shape)


_BY_NAME = {
    "zeros": Zeros, "ones": Ones, "constant": Constant, "random_uniform": RandomUniform,
    "random_normal": RandomNormal, "truncated_normal": TruncatedNormal, "glorot_uniform": GlorotUniform,
    "glorot_normal": GlorotNormal, "he_uniform": HeUniform, "he_normal": HeNormal, "lecun_normal": LecunNormal,
    "variance_scaling": VarianceScaling, "orthogonal": Orthogonal, "lecun_uniform": LecunUniform,
    "identity": Identity,
}


_CLASSES = {cls.__name__: cls for cls in set(_BY_NAME.values())}


def get(identifier, what="initializer"):
    """An Initializer from an instance, a Keras name ('glorot_uniform'), what ``serialize`` wrote
    (``{"class_name": ..., "config": {...}}``) or None (None stays None)."""
    if identifier is None or isinstance(identifier, Initializer):
        return identifier
    if isinstance(identifier, str) and identifier.lower() in _BY_NAME:
        return _BY_NAME[identifier.lower()]()
    if isinstance(identifier, dict) and identifier.get("class_name") in _CLASSES:
        try:
            return _CLASSES[identifier["class_name"]](**identifier.get("config", {}))
        except TypeError as e:
            raise LayerError(f"{what}: expected the arguments of {identifier['class_name']}, received "
                             f"{identifier.get('config')!r} ({e})") from None
    raise LayerError(f"{what}: expected an initializer or one of {sorted(_BY_NAME)}, received {identifier!r}")


def deserialize(config, custom_objects=None):
    """The initializer of a ``serialize`` output (``{"class_name": ..., "config": {...}}``) or a Keras name;
    ``custom_objects``: your own Initializer classes by name."""
    if isinstance(config, dict) and custom_objects and config.get("class_name") in custom_objects:
        return custom_objects[config["class_name"]](**config.get("config", {}))
    if config is None:
        raise LayerError("initializers.deserialize: expected an initializer's name or config, received None")
    if isinstance(config, dict) and config.get("class_name") in _CLASSES:
        config = {**config, "config": _drop_unset(config["class_name"], dict(config.get("config") or {}))}
    return get(config, "initializers.deserialize")


# what Keras writes in a config and flowlayers' classes do not take: kept out where unset (None)
_KERAS_ONLY = ("seed", "input_axes", "output_axes")


def _drop_unset(class_name, config):
    takes = inspect.signature(_CLASSES[class_name]).parameters
    for key in _KERAS_ONLY:
        if key in config and key not in takes:
            if config[key] is not None:
                raise LayerError(f"initializers.deserialize: {class_name} takes no {key} in flowlayers (a "
                                 f"variable's values come from its own seed); expected {key}=None, received "
                                 f"{config[key]!r}")
            del config[key]
    return config


def serialize(initializer):
    """JSON for ``initializer`` that ``get`` turns back into it; None stays None."""
    if initializer is None:
        return None
    takes = inspect.signature(type(initializer)).parameters     # GlorotUniform, Zeros ... take none
    config = {k: v for k, v in initializer.get_config().items() if k in takes}
    return {"class_name": type(initializer).__name__, "config": config}


# Keras 3's other names of its classes (``keras.initializers.glorot_uniform is GlorotUniform``); ``truncated_normal``
# is OneFlow's factory below (``flow.truncated_normal(0.1)``), the Keras class being ``TruncatedNormal``
IdentityInitializer, OrthogonalInitializer = Identity, Orthogonal
constant, zeros, ones = Constant, Zeros, Ones
random_uniform, random_normal, variance_scaling = RandomUniform, RandomNormal, VarianceScaling
glorot_uniform, glorot_normal, he_uniform, he_normal = GlorotUniform, GlorotNormal, HeUniform, HeNormal
lecun_uniform, lecun_normal, orthogonal, identity = LecunUniform, LecunNormal, Orthogonal, Identity


def __getattr__(name):
    """A Keras initializer flowlayers lacks: a LayerError naming it and what to use instead."""
    return missing.refuse("initializers", name, LayerError, globals())


# OneFlow-style factories
def truncated_normal(stddev=1.0, mean=0.0):
    return TruncatedNormal(mean, stddev)


truncated_normal_initializer = truncated_normal


def random_normal_initializer(mean=0.0, stddev=1.0):
    return RandomNormal(mean, stddev)


def random_uniform_initializer(minval=0.0, maxval=1.0):
    return RandomUniform(minval, maxval)


def glorot_uniform_initializer():
    return GlorotUniform()


xavier_uniform_initializer = glorot_uniform_initializer


def glorot_normal_initializer():
    return GlorotNormal()


def zeros_initializer():
    return Zeros()


def ones_initializer():
    return Ones()


def constant_initializer(value=0.0):
    return Constant(value)
