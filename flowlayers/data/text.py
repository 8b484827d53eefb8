"""Text that ships with Python itself, as characters for next-token models; nothing is downloaded.

    >>> from flowlayers.data import CharTokenizer, load_python_text, next_token_windows
    >>> text = load_python_text()                  # sources of a few standard-library modules
    >>> tokenizer = CharTokenizer(text)
    >>> x, y = next_token_windows(tokenizer.encode(text), seq_len=32)
    >>> x.shape[1], bool((x[:, 1:] == y[:, :-1]).all())
    (32, True)

The text is that of the Python running the program, so it may differ between Python versions.
"""
import os
import sysconfig

import numpy as np

from ..errors import InputError

MODULES = ("textwrap", "string", "heapq", "bisect", "fractions", "colorsys")


def load_python_text(modules=MODULES, max_chars=None):
    """The source text of standard-library ``modules`` (pure-Python ones, by name), joined; at most
    ``max_chars`` characters."""
    if isinstance(modules, str) or not modules:
        raise InputError(f"load_python_text: modules expected a non-empty list of module names, received "
                         f"{modules!r}")
    if max_chars is not None and (isinstance(max_chars, bool) or not isinstance(max_chars, int) or max_chars <= 0):
        raise InputError(f"load_python_text: max_chars expected a positive int or None, received {max_chars!r}")
    library = sysconfig.get_paths()["stdlib"]
    parts = []
    for name in modules:
        path = os.path.join(library, *str(name).split(".")) + ".py"
        if not os.path.isfile(path):
            raise InputError(f"load_python_text: module {name!r} expected as a source file of the standard library, "
                             f"received none at {path!r}; name pure-Python modules such as {list(MODULES)}")
        with open(path, encoding="utf-8") as f:
            parts.append(f.read())
    text = "\n".join(parts)
    return text if max_chars is None else text[:max_chars]


class CharTokenizer:
    """Characters <-> ids: the sorted characters of ``text`` are the vocabulary."""

    def __init__(self, text):
        if not isinstance(text, str) or not text:
            raise InputError(f"CharTokenizer: text expected a non-empty str, received {type(text).__name__}")
        self.chars = sorted(set(text))
        self._ids = {c: i for i, c in enumerate(self.chars)}

    @property
    def vocab_size(self):
        return len(self.chars)

    def encode(self, text):
        unknown = sorted(set(text) - set(self._ids))
        if unknown:
            raise InputError(f"CharTokenizer.encode: expected characters of its vocabulary, received {unknown[:5]}")
        return np.fromiter((self._ids[c] for c in text), np.int32, len(text))

    def decode(self, ids):
        return "".join(self.chars[int(i)] for i in np.asarray(ids).reshape(-1))


def next_token_windows(ids, seq_len, stride=None):
    """``(x, y)``: windows of ``seq_len`` ids every ``stride`` (default ``seq_len``) and the same windows one id
    later: the next-token targets."""
    ids = np.asarray(ids)
    if ids.ndim != 1 or ids.dtype.kind not in "iu":
        raise InputError(f"next_token_windows: ids expected a 1-D integer array, received {ids.dtype} of shape "
                         f"{ids.shape}")
    stride = seq_len if stride is None else stride
    for what, v in (("seq_len", seq_len), ("stride", stride)):
        if isinstance(v, bool) or not isinstance(v, int) or v <= 0:
            raise InputError(f"next_token_windows: {what} expected a positive int, received {v!r}")
    starts = np.arange(0, len(ids) - seq_len, stride)
    if not len(starts):
        raise InputError(f"next_token_windows: expected more than seq_len={seq_len} ids, received {len(ids)}")
    x = np.stack([ids[s:s + seq_len] for s in starts]).astype(np.int32)
    y = np.stack([ids[s + 1:s + seq_len + 1] for s in starts]).astype(np.int32)
    return x, y
