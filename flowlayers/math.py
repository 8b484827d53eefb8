"""``flow.math``: elementwise arithmetic and reductions on Blobs."""
from .ops.elementwise import (abs, add, divide, equal, exp, log, maximum, minimum, multiply, negative, pow, rsqrt,  # noqa: A004
                              sigmoid, sqrt, square, subtract, tanh)
from .ops.reduce import argmax, reduce_max, reduce_mean, reduce_sum

__all__ = ["abs", "add", "divide", "equal", "exp", "log", "maximum", "minimum", "multiply", "negative", "pow",
           "rsqrt", "sigmoid", "sqrt", "square", "subtract", "tanh", "argmax", "reduce_max", "reduce_mean",
           "reduce_sum"]
