"""``flow.nn``: activations, pooling, dropout, softmax and losses as functions of Blobs."""
from .ops.conv import avg_pool2d, bias_add, max_pool2d
from .ops.elementwise import elu, gelu, leaky_relu, relu, relu6, selu, sigmoid, silu, softplus, tanh
from .ops.nn import (dropout, log_softmax, sigmoid_cross_entropy_with_logits, softmax,
                     softmax_cross_entropy_with_logits, sparse_softmax_cross_entropy_with_logits)
from .ops.norm import batch_norm, layer_norm

swish = silu

__all__ = ["avg_pool2d", "bias_add", "max_pool2d", "elu", "gelu", "leaky_relu", "relu", "relu6", "selu", "sigmoid",
           "silu", "swish", "softplus", "tanh", "dropout", "log_softmax", "sigmoid_cross_entropy_with_logits",
           "softmax", "softmax_cross_entropy_with_logits", "sparse_softmax_cross_entropy_with_logits",
           "batch_norm", "layer_norm"]
