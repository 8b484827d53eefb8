"""Every front-end op lowered to TensorFlow ops, by name: ``KERNELS[op](node, *inputs, ctx)``."""
from flowlayers.contract import add_kernel

from . import augment, conv, conv3d, depthwise, einsum, elementwise, embedding, matmul, nn, norm, reduce, shape

# one file per op family of the front end (flowlayers/ops/<family>.py)
KERNELS = {**elementwise.KERNELS, **matmul.KERNELS, **einsum.KERNELS, **conv.KERNELS, **conv3d.KERNELS,
           **depthwise.KERNELS, **shape.KERNELS, **embedding.KERNELS, **reduce.KERNELS, **nn.KERNELS, **norm.KERNELS,
           **augment.KERNELS}


def register_kernel(op_name, replace=False):
    """Decorator: ``fn(node, *inputs, ctx)`` lowers the op named ``op_name`` (a custom OpDef) to TF ops.

        @register_kernel("l2_normalize")
        def l2_normalize(node, x, ctx):
            return tf.math.l2_normalize(x, axis=-1, epsilon=node.attrs["epsilon"])
    """
    return lambda fn: add_kernel(KERNELS, op_name, fn, replace)
