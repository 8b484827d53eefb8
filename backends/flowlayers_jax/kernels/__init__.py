"""Every front-end op lowered to JAX ops, by name: ``KERNELS[op](node, *inputs, ctx)``."""
import collections

from .. import CUSTOM_KERNELS
from . import (along_axis, attention, augment, conv, conv3d, depthwise, einsum, elementwise, embedding, indexing,
               matmul, nn, norm, recurrent, reduce, shape)

# one file per op family of the front end (flowlayers/ops/<family>.py); custom ops' kernels first (they may replace one)
KERNELS = collections.ChainMap(CUSTOM_KERNELS, {
    **elementwise.KERNELS, **matmul.KERNELS, **einsum.KERNELS, **conv.KERNELS, **conv3d.KERNELS, **depthwise.KERNELS,
    **shape.KERNELS, **embedding.KERNELS, **reduce.KERNELS, **nn.KERNELS, **norm.KERNELS, **augment.KERNELS,
    **recurrent.KERNELS, **indexing.KERNELS, **along_axis.KERNELS, **attention.KERNELS})
