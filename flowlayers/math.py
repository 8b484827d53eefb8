"""``flow.math``: elementwise arithmetic, comparisons and reductions on Blobs."""
from .ops.elementwise import (abs, add, divide, equal, exp, greater, log, maximum, minimum, multiply,  # noqa: A004
                              negative, pow, rsqrt, sigmoid, sqrt, square, subtract, tanh)
from .ops.reduce import argmax, reduce_max, reduce_mean, reduce_sum

__all__ = ["abs", "add", "divide", "equal", "exp", "greater", "log", "maximum", "minimum", "multiply", "negative",
           "pow", "rsqrt", "sigmoid", "sqrt", "square", "subtract", "tanh", "argmax", "reduce_max", "reduce_mean",
           "reduce_sum"]
