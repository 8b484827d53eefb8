"""``set_random_seed``: one seed for Python's, numpy's and flowlayers' random numbers, as Keras 3 sets them."""
import random

import numpy as np

from .. import config
from ..errors import ConfigError


def set_random_seed(seed):
    """Seed Python's ``random``, numpy's global generator and flowlayers (``flow.config.set_seed``: initial
    weights, dropout, shuffling), so that a program run twice gives the same numbers."""
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)):
        raise ConfigError(f"set_random_seed: expected an int seed, received {seed!r}")
    random.seed(int(seed))
    np.random.seed(int(seed))
    config.set_seed(int(seed))
