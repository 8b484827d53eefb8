"""flowlayers: write a model once, for one logical device; one config line decides how it runs.

    import flowlayers as flow
    flow.config.gpu_device_num(2)
    flow.config.set_view("consistent")   # or "mirrored"
"""
from . import (activations, callbacks, checkpoint, config, data, distribute, initializers, losses, math, metrics,
               nn, optimizer, optimizers, sbp, scope, train, typing)
from . import distribute as distribute_mod
from . import layers
from .dtypes import bfloat16, double, float, float16, float32, float64, int8, int32, int64  # noqa: A004
from .errors import (CheckpointError, ConfigError, DTypeError, EngineError, FlowLayersError, GraphError,
                     InputError, LayerError, SBPError, ShapeError)
from .framework.blob import Blob
from .framework.variable import Variable
from .initializers import (constant_initializer, glorot_normal_initializer, glorot_uniform_initializer,
                           ones_initializer, random_normal_initializer, random_uniform_initializer,
                           truncated_normal, truncated_normal_initializer, xavier_uniform_initializer,
                           zeros_initializer)
from .checkpoint import get_all_variables, load_variables
from .inputs import Input
from .job import function_config, global_function, watch, watch_diff
from .models import Model, Sequential
from .ops.elementwise import add, cast, constant, divide, multiply, subtract
from .ops.matmul import matmul
from .ops.shape import concat, flatten, reshape, transpose
from .ops.embedding import gather

__version__ = "0.1.0"


def clear_session():
    """Forget automatic layer names, job functions and their variables (Keras' ``clear_session``, OneFlow's
    ``clear_default_session``)."""
    from . import job as _job
    from .framework import naming
    from .framework.variable import store

    naming.reset()
    store.variables.clear()
    _job._registered.clear()


def clear_default_session():
    """OneFlow's name for ``clear_session``: forget job functions, their variables and automatic names."""
    clear_session()


def sync_default_session():
    """OneFlow's wait for every job call to finish.  A job call returns only when its step has run (an
    asynchronous job's result is then held for its callback), so nothing is pending when this returns."""


def get_variable(name, shape, dtype=None, initializer=None, trainable=True, distribute=None):
    """OneFlow's ``get_variable`` inside a job function: the variable ``name``, made once and shared by name;
    ``distribute=flow.distribute.split(k)`` splits it along dim ``k`` in the consistent view."""
    from . import dtypes as _dtypes
    from .framework.variable import store
    from .ops import source

    if distribute is not None:
        distribute_mod.check(distribute, f"flow.get_variable({name!r}): distribute")
    var = store.get(name, tuple(shape), _dtypes.as_dtype(dtype), initializers.get(initializer) or
                    initializers.GlorotUniform(), trainable, distribute)
    return source.variable(var)
