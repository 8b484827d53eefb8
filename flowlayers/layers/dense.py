"""Dense: ``activation(x @ kernel + bias)`` over the last axis."""
from .. import activations
from ..errors import LayerError
from ..ops.conv import bias_add
from ..ops.matmul import matmul
from .base import Layer


class Dense(Layer):
    min_ndim = 2

    def __init__(self, units, activation=None, use_bias=True, kernel_initializer="glorot_uniform",
                 bias_initializer="zeros", kernel_regularizer=None, bias_regularizer=None, **kwargs):
        super().__init__(**kwargs)
        if isinstance(units, bool) or not isinstance(units, int) or units <= 0:
            raise LayerError(f"layer {self.name!r} (Dense): units expected a positive int, received {units!r}; "
                             f"pass the number of output features, e.g. Dense(10)")
        self.units, self.use_bias = units, use_bias
        self.activation = activations.get(activation, f"layer {self.name!r}: activation")
        self.keep_kernel_and_bias(kernel_initializer, bias_initializer, kernel_regularizer, bias_regularizer)

    def build(self, input_shape):
        self.kernel = self.add_weight("kernel", (input_shape[-1], self.units), self.kernel_initializer,
                                      regularizer=self.kernel_regularizer)
        self.bias = self.add_weight("bias", (self.units,), self.bias_initializer,
                                    regularizer=self.bias_regularizer) if self.use_bias else None
        self.fix_feature_dims(last=input_shape[-1])

    def call(self, x):
        y = matmul(x, self.read(self.kernel))
        if self.use_bias:
            y = bias_add(y, self.read(self.bias), axis=-1)
        return self.activation(y)

    def get_config(self):
        return {**super().get_config(), "units": self.units, "activation": activations.name_of(self.activation),
                "use_bias": self.use_bias, **self.kernel_and_bias_config()}
