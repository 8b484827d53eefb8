"""Layer: ``__init__`` stores settings, ``build`` makes weights, ``call`` uses ops only.

    class Scale(flow.layers.Layer):
        def build(self, input_shape):
            self.w = self.add_weight(shape=(input_shape[-1],), initializer="ones", name="w")

        def call(self, x):
            return x * self.w           # a weight stands for its value in the graph (``self.read(self.w)``)
"""
import functools
import inspect

import numpy as np

from .. import dtypes, initializers, mixed_precision, regularizers
from ..errors import FlowLayersError, LayerError, ShapeError, describe_shape
from ..framework import graph, naming, step_trace
from ..framework.blob import Blob
from ..framework.variable import Variable, assign_all, store
from ..inputs import Input
from ..ops import dispatch, elementwise, source
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
    def add_weight(self, *args, shape=None, initializer=None, dtype=None, trainable=True, autocast=True,
                   regularizer=None, constraint=None, aggregation="none", overwrite_with_gradient=False, name=None):
        """Keras 3's ``add_weight``: a weight at ``<layer>/<name>`` (``name`` None: ``variable``, ``variable_1``,
        ... within the layer), ``shape`` () when None, ``initializer`` glorot_uniform for floats and zeros for
        other dtypes when None, ``dtype`` the layer's.  Positionally ``(shape, initializer, dtype)`` as in Keras 3,
        or flowlayers' older ``(name, shape, initializer, dtype, trainable, regularizer)`` (a name first).
        ``regularizer`` adds its penalty to the loss while the weight trains; ``autocast`` has nothing to cast
        while layers compute in their variables' dtype.  A ``constraint``, an ``aggregation`` other than
        "none"/"mean", and ``overwrite_with_gradient=True`` are refused by name."""
        given = {"shape": shape, "initializer": initializer, "dtype": dtype, "trainable": trainable,
                 "regularizer": regularizer, "name": name}
        for key, value in self._weight_args(args).items():
            if given[key] is not None and given[key] is not True:
                raise LayerError(f"layer {self.name!r}: add_weight got {key} both by position and by name")
            given[key] = value
        self._refuse_weight_args(constraint, aggregation, overwrite_with_gradient, autocast)
        name = self._weight_name(given["name"])
        path = f"{self.name}/{name}"
        dtype = dtypes.as_dtype(given["dtype"] or self.dtype, f"layer {self.name!r}: {name} dtype")
        init = given["initializer"]
        init = initializers.get(("glorot_uniform" if dtype.is_floating else "zeros") if init is None else init,
                                f"layer {self.name!r}: {name} initializer")
        shape = tuple(given["shape"] or ())
        if any(d is None for d in shape):
            raise LayerError(f"layer {self.name!r}: weight {name!r} expected a shape of known sizes, received "
                             f"{shape}: a size of the layer's input it depends on is None; give the Input that size")
        if _build_in_store:
            var = store.get(path, shape, dtype, init, given["trainable"])
        else:
            var = Variable(path, shape, dtype, init, given["trainable"])
        var.frozen = not self.trainable
        var.regularizer = regularizers.get(given["regularizer"], f"layer {self.name!r}: {name} regularizer")
        self._weights.append(var)
        return var

    def add_variable(self, shape, initializer, dtype=None, trainable=True, autocast=True, regularizer=None,
                     constraint=None, name=None):
        """Keras 3's ``add_variable``: ``add_weight`` with ``shape`` and ``initializer`` required."""
        return self.add_weight(shape=shape, initializer=initializer, dtype=dtype, trainable=trainable,
                               autocast=autocast, regularizer=regularizer, constraint=constraint, name=name)

    def _weight_args(self, args):
        """Positional ``add_weight`` arguments by name: Keras 3's ``(shape, initializer, dtype)``, or flowlayers'
        older ``(name, shape, initializer, dtype, trainable, regularizer)`` when a name comes first."""
        names = ("name", "shape", "initializer", "dtype", "trainable", "regularizer") if args and isinstance(
            args[0], str) else ("shape", "initializer", "dtype")
        if len(args) > len(names):
            raise LayerError(f"layer {self.name!r}: add_weight takes at most {len(names)} positional arguments "
                             f"({', '.join(names)}), received {len(args)}")
        return dict(zip(names, args))

    def _refuse_weight_args(self, constraint, aggregation, overwrite_with_gradient, autocast):
        what = f"layer {self.name!r}: add_weight"
        if constraint is not None:
            raise LayerError(f"{what}: constraint is not supported by flowlayers (nothing projects a weight after "
                             f"each update); expected None, received {constraint!r}")
        if aggregation not in (None, "none", "mean"):
            raise LayerError(f"{what}: aggregation {aggregation!r} is not supported: a flowlayers variable is one "
                             f"logical value in every view; expected 'none' or 'mean', received {aggregation!r}")
        if overwrite_with_gradient:
            raise LayerError(f"{what}: overwrite_with_gradient=True is not supported by flowlayers; expected False, "
                             f"received {overwrite_with_gradient!r}")
        if not isinstance(autocast, bool):
            raise LayerError(f"{what}: autocast expected True or False, received {autocast!r}")

    def _weight_name(self, name):
        """``name`` checked (a new one within this layer), or the next free ``variable``, ``variable_1``, ..."""
        taken = {w.path[len(self.name) + 1:] for w in self._weights}
        if name is None:
            name = next(n for n in (f"variable{'' if i == 0 else f'_{i}'}" for i in range(len(taken) + 1))
                        if n not in taken)
        if not isinstance(name, str) or not name:
            raise LayerError(f"layer {self.name!r}: add_weight name expected a non-empty string, received {name!r}")
        if name in taken and not _build_in_store:
            raise LayerError(f"layer {self.name!r}: add_weight expected a new name within the layer, received "
                             f"{name!r}, which an earlier weight has; name each weight differently")
        return name

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

    # Keras 3's names for the same lists
    variables = property(lambda self: self.weights)
    trainable_variables = property(lambda self: self.trainable_weights)
    non_trainable_variables = property(lambda self: self.non_trainable_weights)

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

    # Losses added in call (Keras 3's add_loss) ----------------------------
    def add_loss(self, loss):
        """Keras 3's: inside ``call``, add a scalar loss term (a Blob of shape ``()``, or a list of them) to the
        loss the model trains on (``compile``'s loss and ``compute_loss`` add it).  In the mirrored view a term
        computed from the batch is each replica's on its rows, averaged over the replicas (exact with equal
        shares)."""
        terms = list(loss) if isinstance(loss, (list, tuple)) else [loss]
        for term in terms:
            term = graph.as_blob(term)
            if not isinstance(term, Blob):
                raise LayerError(f"{self._what}.add_loss: expected a Blob computed in call, received "
                                 f"{type(term).__name__} {term!r}")
            if term.ndim:
                raise LayerError(f"{self._what}.add_loss: expected a scalar Blob (shape ()), received Blob "
                                 f"{term.name!r} of shape {describe_shape(term.shape)}; reduce it first, e.g. "
                                 f"flow.ops.mean(flow.ops.sum(x, axis=1))")
            if not term.dtype.is_floating:
                term = elementwise.cast(term, dtypes.float32)
            self.__dict__.setdefault("_added_losses", []).append(term)

    @property
    def losses(self):
        """The scalar Blobs this layer's calls added with ``add_loss`` (a model's: those of its graph)."""
        return list(self.__dict__.get("_added_losses", ()))

    # Calling ------------------------------------------------------------
    def build(self, input_shape):
        pass

    def call(self, inputs, **kwargs):
        raise NotImplementedError

    def __call__(self, inputs, training=None, **kwargs):
        training = outermost_training(training)
        inputs = self._as_blobs(inputs)
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
    def _as_blobs(self, inputs):
        """``inputs`` as Blobs: a Variable is read; a number or array, inside another layer's ``call`` (where
        Keras would compute on it), becomes a constant."""
        if isinstance(inputs, (list, tuple)):
            return type(inputs)(self._as_blobs(x) for x in inputs)
        x = graph.as_blob(inputs)
        if isinstance(x, Blob):
            return x
        if graph.current_layer() is not None and isinstance(x, (np.ndarray, np.generic, int, float, list)):
            return dispatch.blob(x)
        raise LayerError(f"layer {self.name!r}: expected a Blob (from flow.Input, a Placeholder or another layer), "
                         f"received {type(x).__name__}; numbers and arrays are taken inside another layer's call, "
                         f"where they become constants")

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


def outermost_training(training):
    """Keras 3: a layer called in a custom step outside any other call, without ``training``, runs in inference
    mode (``training=False``); elsewhere ``training`` is as given (None: the step's phase decides)."""
    if training is None and graph.current_layer() is None and step_trace.current() is not None:
        return False
    return training


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
