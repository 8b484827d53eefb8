"""Unique names for layers and ops: ``dense``, ``dense_1``, ... as Keras names them."""
import re

_counts = {}


def unique_name(base):
    """``base`` the first time, then ``base_1``, ``base_2``, ..."""
    n = _counts.get(base, 0)
    _counts[base] = n + 1
    return base if n == 0 else f"{base}_{n}"


def reserve(name):
    """Mark a user-given name as taken so automatic names do not collide with it."""
    m = re.fullmatch(r"(.*)_(\d+)", name)
    base, n = (m.group(1), int(m.group(2))) if m else (name, 0)
    _counts[base] = max(_counts.get(base, 0), n + 1)


def snake_case(name):
    return re.sub(r"(\d)_d(?=_|$)", r"\1d", re.sub(r"(?<!^)(?=[A-Z])", "_", name).lower())   # conv1d, conv2d


def snapshot():
    """The automatic names taken so far, for ``restore``."""
    return dict(_counts)


def restore(taken):
    """Give back the automatic names taken since ``snapshot()`` returned ``taken``."""
    _counts.clear()
    _counts.update(taken)


def reset():
    _counts.clear()
