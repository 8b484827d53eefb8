"""flowlayers: write a model once, for one logical device; one config line decides how it runs.

    import flowlayers as flow
    flow.config.gpu_device_num(2)
    flow.config.set_view("consistent")   # or "mirrored"
"""
from . import blob_api  # noqa: F401  (gives Blob its operators and SBP members)
from . import (activations, callbacks, checkpoint, config, constraints, data, datasets, distribute, env, export,
               initializers, job, losses, math, metrics, nn, optimizer, optimizers, parallel, random, regularizers,
               saving, sbp, scope, settings, train, typing, utils)
from . import mixed_precision
from . import distribute as distribute_mod
from . import dtypes as _dtypes
from . import layers
from .dtypes import bfloat16, double, float, float16, float32, float64, int8, int32, int64  # noqa: A004
from .errors import (CheckpointError, ConfigError, DTypeError, EngineError, FlowLayersError, GraphError,
                     InputError, LayerError, SBPError, ShapeError)
from .framework.blob import Blob
from .framework.step_trace import GradientTape
from .mixed_precision import DTypePolicy
from .framework import naming
from .framework.variable import Variable, store
from .initializers import (constant_initializer, glorot_normal_initializer, glorot_uniform_initializer,
                           ones_initializer, random_normal_initializer, random_uniform_initializer,
                           truncated_normal, truncated_normal_initializer, xavier_uniform_initializer,
                           zeros_initializer)
from .checkpoint import get_all_variables, load_variables
from .inputs import Input
from .job import function_config, global_function, watch, watch_diff
from .models import Model, Sequential
from .ops.elementwise import add, cast, constant, divide, multiply, subtract
from .ops.einsum import einsum
from .ops.matmul import matmul
from .ops.shape import concat, flatten, reshape, transpose
from .ops import source
from .ops.embedding import gather
from .scope import recompute

__version__ = "0.1.0"


def clear_session():
    """Forget automatic layer names, job functions and their variables (Keras' ``clear_session``, OneFlow's
    ``clear_default_session``)."""
    naming.reset()
    store.variables.clear()
    job.forget_jobs()


def clear_default_session():
    """OneFlow's name for ``clear_session``: forget job functions, their variables and automatic names."""
    clear_session()


def sync_default_session():
    """OneFlow's wait for every job call to finish.  A job call returns only when its step has run (an
    asynchronous job's result is then held for its callback), so nothing is pending when this returns."""


def get_variable(name, shape=None, dtype=None, initializer=None, regularizer=None, trainable=None, model_name=None,
                 random_seed=None, distribute=None, reuse=True):
    """OneFlow's ``get_variable`` inside a job function: the variable ``name``, made once and shared by name
    (``reuse=False``: a second request is an error).  ``distribute=flow.distribute.split(k)`` splits it along dim
    ``k`` in the consistent view; ``regularizer`` (``flow.regularizers.l2(...)``) adds OneFlow's penalty to what
    training minimises; ``random_seed`` draws its initial value from that seed instead of the global one."""
    where = f"flow.get_variable({name!r})"
    if shape is None:
        raise ConfigError(f"{where}: shape expected a tuple of ints, received None")
    if model_name is not None:
        raise ConfigError(f"{where}: model_name={model_name!r} is not supported (it named the blob inside OneFlow's "
                          f"legacy variable op); expected None: the variable is known by its name")
    if random_seed is not None and (isinstance(random_seed, bool) or not isinstance(random_seed, int)):
        raise ConfigError(f"{where}: random_seed expected an int or None, received {random_seed!r}")
    if not isinstance(reuse, bool):
        raise ConfigError(f"{where}: reuse expected True or False, received {reuse!r}")
    if not reuse and name in store.variables:
        raise GraphError(f"{where}: reuse=False expected no variable of that name, received one that exists "
                         f"({store.variables[name]!r}); pass reuse=True to share it, or choose another name")
    if distribute is not None:
        distribute_mod.check(distribute, f"{where}: distribute")
    made = name not in store.variables
    var = store.get(name, tuple(shape), _dtypes.as_dtype(dtype), initializers.get(initializer) or
                    initializers.GlorotUniform(), True if trainable is None else bool(trainable), distribute)
    if made:
        var.regularizer = regularizers.get(regularizer, f"{where}: regularizer", convention="oneflow")
        var.random_seed = random_seed
    return source.variable(var)
