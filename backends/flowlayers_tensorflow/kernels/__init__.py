"""Every front-end op lowered to TensorFlow ops, by name: ``KERNELS[op](node, *inputs, ctx)``."""
from . import conv, elementwise, nn, reduce, shape

KERNELS = {**elementwise.KERNELS, **conv.KERNELS, **shape.KERNELS, **reduce.KERNELS, **nn.KERNELS}
