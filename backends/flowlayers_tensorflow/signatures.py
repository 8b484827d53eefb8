"""The SBP signatures DTensor (TF 2.21) can expand: the planner offers only those.  Pure data, no TensorFlow."""
from flowlayers.sbp import Split, broadcast, partial_sum


def supports(op_name, sig):
    """Whether DTensor can expand ``sig`` of op ``op_name``.

    Its convolution wants a replicated filter and unsplit input channels ("Filter for convolution must have
    fully replicated layout", "Conv input's channel dimension must be replicated"); its pooling only a
    replicated or batch-split input ("Only replicated or batch parallel layout is supported").  A kernel
    split by a layout rule is then gathered before the convolution: stored split, computed whole.
    """
    if op_name in ("conv2d", "conv2d_transpose", "conv3d", "depthwise_conv2d"):
        return sig.inputs[1] == broadcast and sig.inputs[0] in (Split(0), broadcast, partial_sum)
    if op_name in ("max_pool2d", "avg_pool2d", "max_pool3d", "avg_pool3d"):
        return sig.inputs[0] in (Split(0), broadcast)
    return True
