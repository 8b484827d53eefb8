"""JAX's persistent compilation cache, switched on and off by the front end's setting
(``flow.config.set_compilation_cache`` or ``$FLOWLAYERS_COMPILATION_CACHE``, handed down in a Placement).

Every program is kept, however fast it compiled: a model's steps on a CPU compile in a fraction of a second each,
below JAX's default threshold of one second, and together they are most of a short run (tutorial 02 in smoke mode:
bench/RESULTS_compile.md).  ``$JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS``, where the user set it, stands.
"""
import os

import jax
from jax.experimental.compilation_cache import compilation_cache


def use(directory):
    """Keep compiled programs in ``directory`` from now on (None: keep none)."""
    compilation_cache.reset_cache()     # JAX opens its cache once: a new directory is opened anew
    if directory is None:
        jax.config.update("jax_compilation_cache_dir", None)
        return
    os.makedirs(directory, exist_ok=True)
    jax.config.update("jax_compilation_cache_dir", directory)
    if "JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS" not in os.environ:
        jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.0)
