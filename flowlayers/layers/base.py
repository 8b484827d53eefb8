"""Layer: ``__init__`` stores settings, ``build`` makes weights, ``call`` uses ops only.

    class Scale(flow.layers.Layer):
        def build(self, input_shape):
            self.w = self.add_weight("w", (input_shape[-1],), initializer="ones")

        def call(self, x):
            return x * self.read(self.w)
"""
import functools
import inspect

from .. import dtypes, initializers, mixed_precision, regularizers
from ..errors import FlowLayersError, LayerError, ShapeError, describe_shape
from ..framework import graph, naming
from ..framework.blob import Blob
from ..framework.variable import Variable, assign_all, store
from ..inputs import Input
from ..ops import elementwise, source
from ..serialization import check_remakes, object_spec

_build_in_store = []   # non-empty while a job function builds: weights are found by path (OneFlow's get_variable)


class Layer:
    #: rank checks made before ``build``/``call``: {"ndim": 4} or {"min_ndim": 2}
    input_ndim = None
    min_ndim = None

    def __init__(self, name=None, trainable=True, dtype=None, input_shape=None, batch_size=None, **kwargs):
        if kwargs:
            raise LayerError(f"{type(self).__name__}: unexpected keyword argument(s) {sorted(kwargs)}")
        if name is not None and (not isinstance(name, str) or not name or "/" in name):
            raise LayerError(f"{type(self).__name__}: name expected a non-empty string without '/', received {name!r}")
        self.dtype_policy = mixed_precision.get(dtype, f"layer {name or type(self).__name__!r}: dtype")
        if name is not None:
            naming.reserve(name)
        self.name = name or naming.unique_name(naming.snake_case(type(self).__name__))
        self._weights = []
        self.built = False
        self._trainable = bool(trainable)      # (no weight to freeze yet)
        self.input_shape_arg = None if input_shape is None else (batch_size,) + tuple(input_shape)
        self._feature_dims = None   # {axis: size} fixed by build; later calls must match
        self.output = None          # the Blob of the latest call (shown by Model.summary)

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        if "__init__" in cls.__dict__:
            cls.__init__ = _names_kept_on_error(cls.__init__)

    # Dtypes (Keras' policy: see flowlayers/mixed_precision.py) ------------
    #: whether float inputs are cast to the compute dtype on entry and float variables read in it (Keras' autocast;
    #: the normalisation layers, which compute their statistics in float32, turn it off)
    autocast = True

    @property
    def dtype(self):
        """The dtype of the layer's variables (Keras: ``layer.dtype`` is ``layer.variable_dtype``)."""
        return dtypes.as_dtype(self.dtype_policy.variable_dtype)

    @property
    def variable_dtype(self):
        return self.dtype

    @property
    def compute_dtype(self):
        """The dtype the layer computes in and returns (a float input is cast to it on entry)."""
        return dtypes.as_dtype(self.dtype_policy.compute_dtype)

    @property
    def trainable(self):
        return self._trainable

    @trainable.setter
    def trainable(self, value):
        """``False`` freezes the layer's weights (Keras: compile again for it to take effect in fit)."""
        self._trainable = bool(value)
        for w in self._weights:
            w.frozen = not self._trainable

    # Weights ------------------------------------------------------------
    def add_weight(self, name, shape, initializer="zeros", dtype=None, trainable=True, regularizer=None):
        """A weight at ``<layer>/<name>``; ``regularizer`` (Keras') adds its penalty to the loss while it trains."""
        path = f"{self.name}/{name}"
        dtype = dtypes.as_dtype(dtype or self.dtype)
        init = initializers.get(initializer, f"layer {self.name!r}: {name} initializer")
        if _build_in_store:
            var = store.get(path, shape, dtype, init, trainable)
        else:
            var = Variable(path, shape, dtype, init, trainable)
        var.frozen = not self.trainable
        var.regularizer = regularizers.get(regularizer, f"layer {self.name!r}: {name} regularizer")
        self._weights.append(var)
        return var

    def keep_kernel_and_bias(self, kernel_initializer, bias_initializer, kernel_regularizer, bias_regularizer):
        """What a layer with a kernel and a bias (Dense, the convolutions, EinsumDense, attention) keeps of their
        initializers and regularizers; ``kernel_and_bias_config`` gives them back for ``get_config``."""
        self.kernel_initializer = initializers.get(kernel_initializer)
        self.bias_initializer = initializers.get(bias_initializer)
        self.kernel_regularizer = regularizers.get(kernel_regularizer, f"layer {self.name!r}: kernel_regularizer")
        self.bias_regularizer = regularizers.get(bias_regularizer, f"layer {self.name!r}: bias_regularizer")

    def kernel_and_bias_config(self):
        return {"kernel_initializer": initializers.serialize(self.kernel_initializer),
                "bias_initializer": initializers.serialize(self.bias_initializer),
                "kernel_regularizer": regularizers.serialize(self.kernel_regularizer),
                "bias_regularizer": regularizers.serialize(self.bias_regularizer)}

    def read(self, var, autocast=None):
        """The Blob reading ``var`` in the graph being built: a float variable in the compute dtype (cast from its
        own, as Keras' autocast scope reads it) unless ``autocast`` (default: the layer's) is off."""
        blob = source.variable(var)
        autocast = self.autocast if autocast is None else autocast
        if autocast and _casts(blob.dtype, self.compute_dtype):
            return elementwise.cast(blob, self.compute_dtype)
        return blob

    @property
    def weights(self):
        return list(self._weights)

    @property
    def trainable_weights(self):
        return [w for w in self.weights if w.trainable]

    @property
    def non_trainable_weights(self):
        return [w for w in self.weights if not w.trainable]

    def get_weights(self):
        """Full logical arrays in Keras order, gathered from every device."""
        return [w.numpy() for w in self.weights]

    def set_weights(self, values):
        """Every weight at once, each array checked before any is written."""
        assign_all(self.weights, values, self._what)

    @property
    def _what(self):
        """How errors name this layer."""
        return f"layer {self.name!r}"

    # Calling ------------------------------------------------------------
    def build(self, input_shape):
        pass

    def call(self, inputs, **kwargs):
        raise NotImplementedError

    def __call__(self, inputs, training=None, **kwargs):
        for x in inputs if isinstance(inputs, (list, tuple)) else [inputs]:
            if not isinstance(x, Blob):
                raise LayerError(f"layer {self.name!r}: expected a Blob (from flow.Input, a Placeholder or another "
                                 f"layer), received {type(x).__name__}")
        self._check_input(inputs)
        with graph.layer_scope(self):
            mask = self._input_mask(inputs, kwargs)
            if not self.built:
                self.build(_shapes(inputs))
                self.built = True
            recorded = dict(kwargs, training=training) if training is not None else dict(kwargs)
            if self.accepts_training:
                kwargs["training"] = training
            if mask is not None:        # not recorded: a saved model's rebuilt inputs carry it again
                kwargs["mask"] = mask
            outputs = graph.record_call(self, inputs, recorded, self.call(self._autocast(inputs), **kwargs))
            self.output = outputs
            return outputs

    def _autocast(self, inputs):
        """Keras' input conversion: each float input of another float dtype cast to the compute dtype."""
        if not self.autocast:
            return inputs
        if isinstance(inputs, (list, tuple)):
            return type(inputs)(self._autocast(x) for x in inputs)
        return elementwise.cast(inputs, self.compute_dtype) if _casts(inputs.dtype, self.compute_dtype) else inputs

    @property
    def accepts_training(self):
        return "training" in inspect.signature(self.call).parameters

    def _input_mask(self, inputs, kwargs):
        """Keras' masks: an input made by a layer with ``output_mask`` (Masking) carries a mask, given to a layer
        whose ``call`` takes ``mask`` (unless one is given: None to give) and refused by name by any other, whose
        values would differ from Keras' downstream."""
        blobs = list(inputs) if isinstance(inputs, (list, tuple)) else [inputs]
        masks = [getattr(x.node.layer, "output_mask", lambda b: None)(x) for x in blobs]
        if all(m is None for m in masks) or "mask" in kwargs:
            return None
        if "mask" not in inspect.signature(self.call).parameters:
            source = next(x.node.layer for x, m in zip(blobs, masks) if m is not None)
            raise LayerError(f"layer {self.name!r} ({type(self).__name__}): its input carries the mask of layer "
                             f"{source.name!r} ({type(source).__name__}), which this layer cannot take; expected "
                             f"a layer that takes a mask (GlobalAveragePooling1D, Attention, AdditiveAttention) "
                             f"right after it")
        return masks if isinstance(inputs, (list, tuple)) else masks[0]

    def fix_feature_dims(self, **axes):
        """Record, in ``build``, input dims that later calls must match (``fix_feature_dims(axis_1=64)``)."""
        self._feature_dims = {int(k.split("_")[-1]) if k != "last" else -1: v for k, v in axes.items()}

    def _check_input(self, inputs):
        if isinstance(inputs, (list, tuple)):
            return
        shape = inputs.shape
        expect = None
        if self.input_ndim is not None and len(shape) != self.input_ndim:
            expect = f"an input of rank {self.input_ndim}"
        elif self.min_ndim is not None and len(shape) < self.min_ndim:
            expect = f"an input of rank >= {self.min_ndim}"
        if expect:
            raise ShapeError(f"layer {self.name!r} ({type(self).__name__}): expected {expect}, received shape "
                             f"{describe_shape(shape)} (rank {len(shape)}); reshape the input first, e.g. with "
                             f"flow.layers.Reshape")
        for axis, size in (self._feature_dims or {}).items():
            if shape[axis] is not None and shape[axis] != size:
                dim = "the last input dim" if axis == -1 else f"input dim {axis}"
                raise ShapeError(f"layer {self.name!r} ({type(self).__name__}): expected {dim} of size {size} (as "
                                 f"when it was built), received shape {describe_shape(shape)}; a layer keeps the "
                                 f"weights it was built with, so call a new layer for other sizes")

    def compute_output_shape(self, input_shape):
        """Output shape for ``input_shape``, found by building the layer's graph symbolically."""
        return self(Input(input_shape[1:], batch_size=input_shape[0])).shape

    def _saved(self, owners, objects):
        """This layer in a saved model (``models/saving.py``): its class and config, checked to make it again."""
        spec = object_spec(self, f"layer {self.name!r}")
        check_remakes(self, spec["config"])
        return spec

    def get_config(self):
        """The constructor's arguments, as JSON values: ``type(layer).from_config(layer.get_config())`` makes the
        same layer (a whole-model save relies on it, so a layer with its own arguments returns them here)."""
        return {"name": self.name, "trainable": self.trainable, "dtype": self.dtype_policy.name}

    @classmethod
    def from_config(cls, config):
        return cls(**config)

    def __repr__(self):
        return f"<{type(self).__name__} name={self.name!r}>"


def _names_kept_on_error(init):
    """A constructor that rejects its arguments takes no automatic name: the next ``Dense`` is still ``dense``,
    so variable paths (and checkpoints keyed by them) do not depend on earlier mistakes."""
    @functools.wraps(init)
    def wrapped(self, *args, **kwargs):
        taken = naming.snapshot()
        try:
            init(self, *args, **kwargs)
        except FlowLayersError:
            naming.restore(taken)
            raise
    return wrapped


def _casts(dtype, compute):
    """Whether a value of ``dtype`` is cast to ``compute``: floats of another float dtype, as Keras casts."""
    return dtype.is_floating and compute.is_floating and dtype != compute


def _shapes(inputs):
    if isinstance(inputs, (list, tuple)):
        return [x.shape for x in inputs]
    return inputs.shape
