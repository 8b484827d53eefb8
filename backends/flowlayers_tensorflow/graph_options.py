"""Grappler settings for flowlayers' own step functions.

TF optimises a function's graph once, at its first call, with the options of the calling thread's eager context.
Its defaults run passes that, on a deep model's step, cost seconds and change nothing there:

- the memory optimizer: it acts on ops marked for recomputation or swapping, never ours;
- the layout optimizer on CPU: CPU kernels take NHWC, which the lowering already emits (on GPUs the lowering
  emits NCHW itself, but mixed-precision steps may still gain from it, so it stays on there);
- TFG's attribute and shape-inference passes: graph-preserving clean-ups;
- a second round of every pass: it only merges a few hundred duplicated constants.

Turning them off makes a 200-layer MLP's first step seconds faster, and LeNet's optimised step holds the same ops
(fused convolutions and matmuls, folded constants) as before.  The rest stays on, for a DTensor update step too:
without grappler it compiles faster, but the models then train slower (figures: bench/RESULTS_design.md).  The user's own settings (``tf.config.optimizer``) are the starting point; only
these fields change.
"""
import contextlib

from tensorflow.core.protobuf import config_pb2
from tensorflow.core.protobuf.rewriter_config_pb2 import RewriterConfig
from tensorflow.python.eager import context

_cache = {}


@contextlib.contextmanager
def step_options(cpu):
    """Functions first called inside are optimised with flowlayers' grappler settings; ``cpu``: the step runs on
    CPU devices."""
    ctx = context.context()
    current = ctx.function_call_options
    key = (current.config_proto_serialized, current.executor_type, cpu)
    if key not in _cache:
        config = config_pb2.ConfigProto.FromString(current.config_proto_serialized)
        rewrites = config.graph_options.rewrite_options
        rewrites.memory_optimization = RewriterConfig.NO_MEM_OPT
        rewrites.meta_optimizer_iterations = RewriterConfig.ONE
        rewrites.disable_tfg_optimizer = True
        if cpu:
            rewrites.layout_optimizer = RewriterConfig.OFF
        _cache[key] = context.FunctionCallOptions(current.executor_type, config)
    ctx.function_call_options = _cache[key]
    try:
        yield
    finally:
        ctx.function_call_options = current
