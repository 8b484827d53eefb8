"""Small layers: Dropout, Activation, ReLU, Softmax, Add, Concatenate, Embedding."""
from .. import activations, initializers
from ..errors import LayerError, ShapeError
from ..ops import elementwise, embedding, nn, shape as shape_ops
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


class _Merge(Layer):
    def _check(self, inputs):
        if not isinstance(inputs, (list, tuple)) or len(inputs) < 2:
            raise LayerError(f"layer {self.name!r} ({type(self).__name__}): expected a list of at least 2 Blobs, "
                             f"received {inputs!r}")


class Add(_Merge):
    def call(self, inputs):
        self._check(inputs)
        out = inputs[0]
        for x in inputs[1:]:
            if x.shape != out.shape:
                raise ShapeError(f"layer {self.name!r} (Add): expected inputs of one shape, received "
                                 f"{[y.shape for y in inputs]}")
            out = elementwise.add(out, x)
        return out


class Concatenate(_Merge):
    def __init__(self, axis=-1, **kwargs):
        super().__init__(**kwargs)
        self.axis = axis

    def call(self, inputs):
        self._check(inputs)
        return shape_ops.concat(inputs, axis=self.axis)


class Embedding(Layer):
    def __init__(self, input_dim, output_dim, embeddings_initializer="uniform", **kwargs):
        super().__init__(**kwargs)
        for what, v in (("input_dim", input_dim), ("output_dim", output_dim)):
            if isinstance(v, bool) or not isinstance(v, int) or v <= 0:
                raise LayerError(f"layer {self.name!r} (Embedding): {what} expected a positive int, received {v!r}")
        self.input_dim, self.output_dim = input_dim, output_dim
        init = "random_uniform" if embeddings_initializer == "uniform" else embeddings_initializer
        self.embeddings_initializer = initializers.get(init)

    def build(self, input_shape):
        self.embeddings = self.add_weight("embeddings", (self.input_dim, self.output_dim),
                                          self.embeddings_initializer)

    def call(self, ids):
        return embedding.gather(self.read(self.embeddings), ids)

    def get_config(self):
        return {**super().get_config(), "input_dim": self.input_dim, "output_dim": self.output_dim}
