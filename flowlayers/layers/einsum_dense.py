"""EinsumDense: a dense layer whose product is an einsum equation, with Keras 3's arguments and shapes.

    flow.layers.EinsumDense("abc,cde->abde", output_shape=(None, 4, 16), bias_axes="de")   # per-head projection

The first term is the input, the second the kernel; ``output_shape`` gives the output's dims after the batch
(``None``: the input's), or after the dims a leading ``...`` stands for.  The kernel's shape comes from the
letters it shares with the input and the output; ``bias_axes`` names output letters, and the bias spans from the
first of them to the last output dim (1 where a letter has no bias), as in Keras.
"""
from .. import activations, initializers
from ..errors import LayerError
from ..ops.einsum import einsum, parse
from .base import Layer


class EinsumDense(Layer):
    def __init__(self, equation, output_shape, activation=None, bias_axes=None, kernel_initializer="glorot_uniform",
                 bias_initializer="zeros", kernel_regularizer=None, bias_regularizer=None, **kwargs):
        super().__init__(**kwargs)
        self.what = what = f"layer {self.name!r} (EinsumDense)"
        if not isinstance(equation, str) or equation.count(",") != 1 or "->" not in equation:
            raise LayerError(f"{what}: equation expected 'input,kernel->output' (e.g. 'ab,bc->ac'), received "
                             f"{equation!r}")
        shape = (output_shape,) if isinstance(output_shape, int) or output_shape is None else output_shape
        if not isinstance(shape, (tuple, list)) or not all(d is None or (isinstance(d, int) and d > 0)
                                                          for d in shape):
            raise LayerError(f"{what}: output_shape expected an int or a tuple of ints (None: the input's), received "
                             f"{output_shape!r}")
        self.equation, self.output_shape, self.bias_axes = equation, tuple(shape), bias_axes
        self.activation = activations.get(activation, f"{what}: activation")
        self.keep_kernel_and_bias(kernel_initializer, bias_initializer, kernel_regularizer, bias_regularizer)

    def _explicit(self, rank):
        """The equation with a leading ``...`` spelled out in letters it does not use, for an input of ``rank``."""
        left, out = self.equation.replace(" ", "").split("->")
        x, k = left.split(",")
        if "..." not in x:
            return x, k, out
        free = [c for c in "ABCDEFGHIJKLMNOPQRSTUVWXYZ" if c not in self.equation][:rank - len(x) + 3]
        if not (x.startswith("...") and out.startswith("...")):
            raise LayerError(f"{self.what}: equation expected '...' at the start of the input and the output, "
                             f"received {self.equation!r}")
        return "".join(free) + x[3:], k, "".join(free) + out[3:]

    def build(self, input_shape):
        x, k, out = self._explicit(len(input_shape))
        parse(f"{x},{k}->{out}", 2)
        if len(x) != len(input_shape):
            raise LayerError(f"{self.what}: equation {self.equation!r} expected an input of rank {len(x)}, received "
                             f"shape {input_shape}")
        elided = len(out) - len(self.output_shape)
        if elided < 0:
            raise LayerError(f"{self.what}: output_shape expected {len(out) - 1} dims after the batch for output "
                             f"{out!r}, received {self.output_shape}")
        sizes = dict(zip(x, input_shape))
        for letter, size in zip(out[elided:], self.output_shape):
            if size is not None:
                sizes[letter] = size
        missing = [c for c in k + out if sizes.get(c) is None and c not in x]
        if missing:
            raise LayerError(f"{self.what}: the size of letter {missing[0]!r} expected from the input or "
                             f"output_shape, received neither (equation {self.equation!r}, output_shape "
                             f"{self.output_shape})")
        self._equation = f"{x},{k}->{out}"
        self.kernel = self.add_weight("kernel", tuple(sizes[c] for c in k), kernel_fans(self.kernel_initializer, self._equation),
                                      regularizer=self.kernel_regularizer)
        self.bias = None
        if self.bias_axes:
            unknown = [c for c in self.bias_axes if c not in out]
            if unknown:
                raise LayerError(f"{self.what}: bias_axes expected letters of the output {out!r}, received "
                                 f"{self.bias_axes!r}")
            first = min(out.index(c) for c in self.bias_axes)
            shape = tuple(sizes[c] if c in self.bias_axes else 1 for c in out[first:])
            self.bias = self.add_weight("bias", shape, self.bias_initializer, regularizer=self.bias_regularizer)

    def call(self, x):
        y = einsum(self._equation, x, self.read(self.kernel))
        return self.activation(y + self.read(self.bias) if self.bias is not None else y)

    def get_config(self):
        return {**super().get_config(), "equation": self.equation, "output_shape": self.output_shape,
                "activation": activations.name_of(self.activation), "bias_axes": self.bias_axes,
                **self.kernel_and_bias_config()}


def kernel_fans(initializer, equation):
    """A VarianceScaling ``initializer`` whose fans are, of the kernel's letters in ``equation`` ('x,kernel->out'),
    those of the output (fan out) and the others (fan in), as Keras 3.15's EinsumDense gives them; any other
    initializer as it is."""
    if not isinstance(initializer, initializers.VarianceScaling):
        return initializer
    left, out = equation.split("->")
    kernel = left.split(",")[1]
    return initializer.with_axes([i for i, c in enumerate(kernel) if c not in out],
                                 [i for i, c in enumerate(kernel) if c in out])
