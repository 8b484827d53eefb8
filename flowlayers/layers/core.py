"""Small layers: Dropout, Activation, ReLU, Softmax, Rescaling, the merges (Add, Subtract, Multiply, Average,
Concatenate, and Keras' functional forms add(...) etc.), Embedding, ReversibleEmbedding."""
from .. import activations, dtypes, initializers, regularizers
from ..errors import LayerError, ShapeError
from ..ops import elementwise, embedding, nn
from ..ops.einsum import einsum
from ..ops.shape import concat
from .base import Layer


class Dropout(Layer):
    def __init__(self, rate, seed=None, **kwargs):
        super().__init__(**kwargs)
        if not isinstance(rate, (int, float)) or not 0 <= rate < 1:
            raise LayerError(f"layer {self.name!r} (Dropout): rate expected a number in [0, 1), received {rate!r}")
        self.rate, self.seed = float(rate), seed

    def call(self, x, training=None):
        return nn.dropout(x, self.rate, training=training, seed=self.seed)

    def get_config(self):
        return {**super().get_config(), "rate": self.rate, "seed": self.seed}


class Activation(Layer):
    def __init__(self, activation, **kwargs):
        super().__init__(**kwargs)
        self.activation = activations.get(activation, f"layer {self.name!r}: activation")

    def call(self, x):
        return self.activation(x)

    def get_config(self):
        return {**super().get_config(), "activation": activations.name_of(self.activation)}


class ReLU(Layer):
    def call(self, x):
        return elementwise.relu(x)


class Softmax(Layer):
    def __init__(self, axis=-1, **kwargs):
        super().__init__(**kwargs)
        self.axis = axis

    def call(self, x):
        return nn.softmax(x, axis=self.axis)

    def get_config(self):
        return {**super().get_config(), "axis": self.axis}


class _Merge(Layer):
    def _check(self, inputs):
        if not isinstance(inputs, (list, tuple)) or len(inputs) < 2:
            raise LayerError(f"layer {self.name!r} ({type(self).__name__}): expected a list of at least 2 Blobs, "
                             f"received {inputs!r}")

    def _same_shapes(self, inputs):
        self._check(inputs)
        if any(x.shape != inputs[0].shape for x in inputs):
            raise ShapeError(f"layer {self.name!r} ({type(self).__name__}): expected inputs of one shape, received "
                             f"{[y.shape for y in inputs]}")
        return inputs

    def _fold(self, inputs, op):
        """``op`` over inputs of one shape, left to right."""
        out, *rest = self._same_shapes(inputs)
        for x in rest:
            out = op(out, x)
        return out


class Add(_Merge):
    def call(self, inputs):
        return self._fold(inputs, elementwise.add)


class Subtract(_Merge):
    """``inputs[0] - inputs[1]``: exactly two inputs, as in Keras."""

    def call(self, inputs):
        self._check(inputs)
        if len(inputs) != 2:
            raise LayerError(f"layer {self.name!r} (Subtract): expected exactly 2 inputs, received {len(inputs)}")
        return elementwise.subtract(*self._same_shapes(inputs))


class Multiply(_Merge):
    def call(self, inputs):
        return self._fold(inputs, elementwise.multiply)


class Average(_Merge):
    def call(self, inputs):
        return elementwise.multiply(self._fold(inputs, elementwise.add), 1.0 / len(inputs))


class Rescaling(Layer):
    """``x * scale + offset`` (Keras' preprocessing layer; the values are floats)."""

    def __init__(self, scale, offset=0.0, **kwargs):
        super().__init__(**kwargs)
        for what, v in (("scale", scale), ("offset", offset)):
            if isinstance(v, bool) or not isinstance(v, (int, float)):
                raise LayerError(f"layer {self.name!r} (Rescaling): {what} expected a number, received {v!r}")
        self.scale, self.offset = float(scale), float(offset)

    def call(self, x):
        y = elementwise.multiply(x, self.scale)
        return elementwise.add(y, self.offset) if self.offset else y

    def get_config(self):
        return {**super().get_config(), "scale": self.scale, "offset": self.offset}


class Concatenate(_Merge):
    def __init__(self, axis=-1, **kwargs):
        super().__init__(**kwargs)
        self.axis = axis

    def call(self, inputs):
        self._check(inputs)
        return concat(inputs, axis=self.axis)

    def get_config(self):
        return {**super().get_config(), "axis": self.axis}


class Embedding(Layer):
    """``mask_zero=True``: id 0 pads, and a recurrent layer fed this layer's output skips those steps (Keras'
    mask; an id of 0 is then not a word, so ``input_dim`` counts it)."""

    #: Keras' Embedding gathers from its float32 table and casts the rows to the compute dtype
    autocast = False

    def __init__(self, input_dim, output_dim, embeddings_initializer="uniform", embeddings_regularizer=None,
                 embeddings_constraint=None, mask_zero=False, **kwargs):
        super().__init__(**kwargs)
        for what, v in (("input_dim", input_dim), ("output_dim", output_dim)):
            if isinstance(v, bool) or not isinstance(v, int) or v <= 0:
                raise LayerError(f"layer {self.name!r} (Embedding): {what} expected a positive int, received {v!r}")
        if embeddings_constraint is not None:
            raise LayerError(f"layer {self.name!r} (Embedding): embeddings_constraint is not supported by "
                             f"flowlayers, received {embeddings_constraint!r}; expected None")
        if not isinstance(mask_zero, bool):
            raise LayerError(f"layer {self.name!r} (Embedding): mask_zero expected True or False, received "
                             f"{mask_zero!r}")
        self.input_dim, self.output_dim, self.mask_zero = input_dim, output_dim, mask_zero
        init = "random_uniform" if embeddings_initializer == "uniform" else embeddings_initializer
        self.embeddings_initializer = initializers.get(init)
        self.embeddings_regularizer = regularizers.get(embeddings_regularizer,
                                                       f"layer {self.name!r}: embeddings_regularizer")

    def build(self, input_shape):
        self.embeddings = self.add_weight("embeddings", (self.input_dim, self.output_dim),
                                          self.embeddings_initializer, regularizer=self.embeddings_regularizer)

    def call(self, ids):
        if not ids.dtype.is_integer:        # Keras casts ids of another dtype (a default float Input) to int32
            ids = elementwise.cast(ids, dtypes.int32)
        rows = embedding.gather(self.read(self.embeddings), ids)
        return rows if rows.dtype == self.compute_dtype else elementwise.cast(rows, self.compute_dtype)

    def get_config(self):
        return {**super().get_config(), "input_dim": self.input_dim, "output_dim": self.output_dim,
                "embeddings_initializer": initializers.serialize(self.embeddings_initializer),
                "embeddings_regularizer": regularizers.serialize(self.embeddings_regularizer),
                "embeddings_constraint": None, "mask_zero": self.mask_zero}


class ReversibleEmbedding(Embedding):
    """Keras' ``ReversibleEmbedding``: an Embedding that, called with ``reverse=True``, projects vectors back to
    the vocabulary, by the transpose of its table (``tie_weights=True``) or by its own ``reverse_embeddings``
    ``(output_dim, input_dim)``: a language model's output head.  ``logit_soft_cap`` gives
    ``cap * tanh(logits / cap)``; ``reverse_dtype`` the dtype the reverse product is computed in."""

    def __init__(self, input_dim, output_dim, tie_weights=True, embeddings_initializer="uniform",
                 embeddings_regularizer=None, embeddings_constraint=None, mask_zero=False, reverse_dtype=None,
                 logit_soft_cap=None, **kwargs):
        super().__init__(input_dim, output_dim, embeddings_initializer, embeddings_regularizer, **kwargs)
        who = f"layer {self.name!r} (ReversibleEmbedding)"
        for what, value in (("embeddings_constraint", embeddings_constraint), ("mask_zero", mask_zero or None)):
            if value is not None:
                raise LayerError(f"{who}: {what} is not supported by flowlayers, received {value!r}; leave it at "
                                 f"Keras' default")
        if not isinstance(tie_weights, bool):
            raise LayerError(f"{who}: tie_weights expected True or False, received {tie_weights!r}")
        if logit_soft_cap is not None and (isinstance(logit_soft_cap, bool) or not isinstance(
                logit_soft_cap, (int, float)) or logit_soft_cap <= 0):
            raise LayerError(f"{who}: logit_soft_cap expected a positive number or None, received {logit_soft_cap!r}")
        self.tie_weights, self.logit_soft_cap = tie_weights, logit_soft_cap
        self.reverse_dtype = None if reverse_dtype is None else dtypes.as_dtype(reverse_dtype, f"{who}: reverse_dtype")

    def build(self, input_shape):
        super().build(input_shape)
        if not self.tie_weights:
            self.reverse_embeddings = self.add_weight("reverse_embeddings", (self.output_dim, self.input_dim),
                                                      self.embeddings_initializer)

    def call(self, inputs, reverse=False):
        if not reverse:
            return super().call(inputs)
        if inputs.shape[-1] != self.output_dim:
            raise ShapeError(f"layer {self.name!r} (ReversibleEmbedding): reverse=True expected vectors of size "
                             f"{self.output_dim} in the last dim, received shape {inputs.shape}")
        dims = "abcdefghijklmnopqrstu"[:inputs.ndim - 1]
        if self.tie_weights:
            kernel, equation = self.read(self.embeddings), f"{dims}w,vw->{dims}v"
        else:
            kernel, equation = self.read(self.reverse_embeddings), f"{dims}w,wv->{dims}v"
        if self.reverse_dtype is not None:
            inputs, kernel = elementwise.cast(inputs, self.reverse_dtype), elementwise.cast(kernel, self.reverse_dtype)
        elif inputs.dtype != kernel.dtype and inputs.dtype.is_floating:
            inputs = elementwise.cast(inputs, kernel.dtype)    # Keras' promotion: 16-bit vectors, float32 table
        logits = einsum(equation, inputs, kernel)
        if self.logit_soft_cap is not None:
            logits = elementwise.tanh(logits / self.logit_soft_cap) * self.logit_soft_cap
        return logits

    def get_config(self):
        return {**super().get_config(), "tie_weights": self.tie_weights, "logit_soft_cap": self.logit_soft_cap,
                "reverse_dtype": None if self.reverse_dtype is None else self.reverse_dtype.name,
                "embeddings_constraint": None, "mask_zero": False}


def add(inputs, **kwargs):
    """Keras' functional form of ``Add``: ``add([a, b])``."""
    return Add(**kwargs)(inputs)


def subtract(inputs, **kwargs):
    return Subtract(**kwargs)(inputs)


def multiply(inputs, **kwargs):
    return Multiply(**kwargs)(inputs)


def average(inputs, **kwargs):
    return Average(**kwargs)(inputs)


def concatenate(inputs, axis=-1, **kwargs):
    return Concatenate(axis=axis, **kwargs)(inputs)
