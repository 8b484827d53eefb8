"""Grappler settings for flowlayers' own step functions.

TF optimises a function's graph once, at its first call, with the options of the calling thread's eager context.
Its defaults run passes that, on a 200-layer MLP's step, cost seconds and change nothing there:

- the memory optimizer (0.5 s on 2 devices): it acts on ops marked for recomputation or swapping, never ours;
- the layout optimizer on CPU (0.35 s): CPU kernels take NHWC, which the lowering already emits (on GPUs the
  lowering emits NCHW itself, but mixed-precision steps may still gain from it, so it stays on there);
- TFG's attribute and shape-inference passes (0.4 s): graph-preserving clean-ups;
- a second round of every pass (1 s): it only merges a few hundred duplicated constants.

Turning them off makes the first step of that model 2-3 s faster (grappler: 3.8 s -> 1.2 s), and the optimised
graphs of LeNet and the MLPs hold the same ops (fused matmul and convolution, folded constants) as before.  An
update step, a flat list of one fused optimizer op per variable, gains nothing from grappler at all and skips it.
The user's own settings (``tf.config.optimizer``) are the starting point; only these fields change.
"""
import contextlib

from tensorflow.core.protobuf import config_pb2, rewriter_config_pb2
from tensorflow.python.eager import context

OFF = rewriter_config_pb2.RewriterConfig.OFF
_cache = {}


@contextlib.contextmanager
def step_options(cpu, optimize=True):
    """Functions first called inside run with flowlayers' grappler settings (``optimize=False``: no grappler);
    ``cpu``: the step runs on CPU devices."""
    ctx = context.context()
    current = ctx.function_call_options
    key = (current.config_proto_serialized, current.executor_type, cpu, optimize)
    if key not in _cache:
        config = config_pb2.ConfigProto.FromString(current.config_proto_serialized)
        rewrites = config.graph_options.rewrite_options
        if optimize:
            rewrites.memory_optimization = rewriter_config_pb2.RewriterConfig.NO_MEM_OPT
            rewrites.meta_optimizer_iterations = rewriter_config_pb2.RewriterConfig.ONE
            rewrites.disable_tfg_optimizer = True
            if cpu:
                rewrites.layout_optimizer = OFF
        else:
            rewrites.disable_meta_optimizer = True
        _cache[key] = context.FunctionCallOptions(current.executor_type, config)
    ctx.function_call_options = _cache[key]
    try:
        yield
    finally:
        ctx.function_call_options = current
