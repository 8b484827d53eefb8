"""Local data sets for examples and tests; nothing here ever downloads.

    >>> from flowlayers.data import load_digits
    >>> (x_train, y_train), (x_test, y_test) = load_digits()
    >>> x_test.shape
    (359, 1, 8, 8)
"""
from .digits import load_digits
from .idx import read_idx
from .mnist import load_mnist, load_mnist_arrays, write_mnist_npz
from .text import CharTokenizer, load_python_text, next_token_windows

__all__ = ["load_mnist", "load_mnist_arrays", "write_mnist_npz", "load_digits", "read_idx", "load_python_text",
           "CharTokenizer", "next_token_windows"]
