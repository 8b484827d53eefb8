"""Where flowlayers' first step goes: timers wrapped around its phases (bench_first_step.py --phases only).

Phases, each timed without the phases inside it (wall and CPU seconds of the process):

- ``build``: the step's Program traced from the model (``Trainer.program``: loss, metrics, optimizer update);
- ``plan``: the planner (``plan.program_plan``);
- ``runtime``: the engine's runtime started (devices, mesh);
- ``executable``: the runtime's executable made from the Program (``Runtime.compile``: the TensorFlow backend
  builds its graph functions here);
- ``variables``: the variables' initial values made on the devices (``Compiled.handles``; the jax backend draws
  them all in one program when one is first read, ``Draws.run``);
- ``step``: the rest of the first ``Compiled`` call: tracing the step into the engine's program, the engine's
  compile, and running it.

On the jax backend JAX's own compile events split the work of all its programs further: ``jax: trace`` (Python
tracing to a jaxpr: flowlayers' kernels run here), ``jax: to MLIR`` and ``jax: XLA compile``.
"""
import functools
import resource
import time

_totals, _stack = {}, []


def _cpu():
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def _timed(name, fn):
    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        start = (time.perf_counter(), _cpu())
        _stack.append([0.0, 0.0])      # time of the phases inside this one
        try:
            return fn(*args, **kwargs)
        finally:
            inner = _stack.pop()
            wall, cpu = time.perf_counter() - start[0], _cpu() - start[1]
            total = _totals.setdefault(name, [0.0, 0.0])
            total[0] += wall - inner[0]
            total[1] += cpu - inner[1]
            if _stack:
                _stack[-1][0] += wall
                _stack[-1][1] += cpu
    return wrapper


def _wrap(owner, attr, name):
    setattr(owner, attr, _timed(name, getattr(owner, attr)))


def install(backend):
    """Wrap the phases of ``backend`` (jax | tensorflow); call before the model is built."""
    from flowlayers import engine
    from flowlayers.framework import compiled
    from flowlayers.models import trainer
    from flowlayers.parallel import plan

    _wrap(trainer.Trainer, "program", "build")
    _wrap(plan, "program_plan", "plan")
    _wrap(engine, "runtime", "runtime")
    _wrap(compiled.Compiled, "handles", "variables")
    _wrap(compiled.Compiled, "__call__", "step")
    if backend == "jax":
        import jax.monitoring
        from flowlayers_jax import runtime, variables

        _wrap(runtime.Runtime, "compile", "executable")
        _wrap(variables.Draws, "run", "variables")
        names = {"/jax/core/compile/jaxpr_trace_duration": "jax: trace",
                 "/jax/core/compile/jaxpr_to_mlir_module_duration": "jax: to MLIR",
                 "/jax/core/compile/backend_compile_duration": "jax: XLA compile"}

        def listen(event, seconds, **_):
            if event in names:
                _totals.setdefault(names[event], [0.0, 0.0])[0] += seconds
        jax.monitoring.register_event_duration_secs_listener(listen)
    else:
        from flowlayers_tensorflow import runtime

        _wrap(runtime.ConsistentRuntime, "compile", "executable")
        _wrap(runtime.StrategyRuntime, "compile", "executable")


def report():
    """Phase -> [wall s, CPU s] (JAX's events: wall only, CPU 0)."""
    return dict(_totals)
