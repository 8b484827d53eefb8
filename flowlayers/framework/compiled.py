"""A Program compiled for one Placement: planned once, its variables bound, the backend's step called.

The front end does everything that is not the engine's: it checks the layout rules and runs the planner against the
backend's ``Capabilities``, keeping one plan per fed batch size, which the backend's executable, ``model.summary()``
and ``parallel_plan()`` all read.  Planning needs no engine; the runtime and the executable are made when a step
or a value first needs them.  Every variable's value is then moved into the runtime, in the layout the placement
gives it, and the engine handles are handed to each step.
"""
import functools
import weakref

from .. import engine, env
from ..backend_common import step_by_step
from ..parallel import plan as planner
from . import graph
from .variable import check_rules, live_variables, moves as live_moves

_live = weakref.WeakSet()     # compiled programs, whose plans Blob.sbp reads first


class Compiled:
    def __init__(self, program, placement):
        env.heartbeat(steps=0)      # a stage every process passes: the launcher's watch counts it
        self.program, self.placement = program, placement
        self.capabilities = engine.capabilities(placement.backend)
        check_rules(placement, program.variables, live_variables())     # before any variable moves
        self.variables = list(program.variables) + [s for slots in program.slots.values() for s in slots] + \
            list(program.state)
        self._plans, self._handles, self._moved = {}, None, None
        self._nodes = {id(n) for n in program.nodes}
        if placement.consistent:
            self.plan(None)     # forced signatures and constraints are checked before any step
        _live.add(self)

    def plan(self, batch=None):
        """The Plan for ``batch`` fed rows (None: the placeholders' own batch dims), made once per size."""
        if batch not in self._plans:
            self._plans[batch] = planner.program_plan(self.program, self.placement, self.capabilities, batch)
        return self._plans[batch]

    @functools.cached_property
    def runtime(self):
        """The engine's runtime for the placement (started here, the first time anything needs it)."""
        return engine.runtime(self.placement)

    @functools.cached_property
    def executable(self):
        return self.runtime.compile(self.program, self.plan if self.placement.consistent else None,
                                    self.placement.seed)

    def handles(self):
        """``{path: engine handle}`` of the program's variables and optimizer slots, each moved into this runtime
        and layout if it lives elsewhere (a view switch and back, a value loaded elsewhere, new rules)."""
        if self._moved != live_moves():
            self._handles = {v.path: v.handle_in(self.runtime, self.placement) for v in self.variables}
            self._moved = live_moves()
        return self._handles

    def __call__(self, feeds, lr=0.0, step=1):
        env.heartbeat()
        return self.executable(feeds, self.handles(), lr, step)

    def run(self, feeds, optimizer=None):
        """One step, the one helper of ``fit``, ``evaluate``, ``predict`` and job functions: with ``optimizer``, at
        its learning rate and next step number, counted once the step has run."""
        if optimizer is None:
            return self(feeds)
        values = self(feeds, *_rate_and_step(optimizer))
        optimizer.iterations += 1
        return values

    def compiled_text(self, feeds, optimizer=None):
        """The program the engine compiles for the step ``run(feeds, optimizer)`` would run, as text, compiled and
        not run (where ``capabilities.shows_program``)."""
        lr, step = (0.0, 1) if optimizer is None else _rate_and_step(optimizer)
        return self.executable.compiled_text(feeds, self.handles(), lr, step)

    def takes_rows(self, rows, sources):
        """Whether ``run_steps`` is faster handed ``Rows`` of ``sources`` than fed (``Executable.takes_rows``)."""
        return self.capabilities.takes_rows and self.executable.takes_rows(rows, sources)

    def run_steps(self, feeds, count, optimizer=None):
        """``count`` steps in one call (per input a ``Rows`` or an array stacked over the steps), each at its step's
        learning rate: in one dispatch where the backend can (``Executable.steps``), else one by one.  Returns per
        output its values stacked over the steps."""
        first = 1 if optimizer is None else optimizer.iterations + 1
        lrs = [0.0 if optimizer is None else optimizer.learning_rate_at(first + k - 1) for k in range(count)]
        env.heartbeat(count)
        steps = self.executable.steps if self.capabilities.several_steps else \
            functools.partial(step_by_step, self.executable)
        values = steps(feeds, self.handles(), lrs, first)
        if optimizer is not None:
            optimizer.iterations += count
        return values


def _rate_and_step(optimizer):
    """The learning rate and number of ``optimizer``'s next step."""
    return optimizer.current_learning_rate(), optimizer.iterations + 1


_graph_plans = weakref.WeakKeyDictionary()     # Blob -> {(placement, graph revision): its nd-SBP}


def planned_sbp(blob, placement):
    """``Blob.sbp``: the Blob's nd-SBP in the plan of a program compiled on ``placement`` that holds it (the plan
    its steps run), else in the plan of the graph that makes it (made once); None in the mirrored view."""
    if not placement.consistent:
        return None
    for compiled in list(_live):
        if compiled.placement == placement and id(blob.node) in compiled._nodes:
            return compiled.plan(None).sbp[blob]
    known, key = _graph_plans.setdefault(blob, {}), (placement, graph.revision())
    if key not in known:
        capabilities = engine.capabilities(placement.backend)
        known[key] = planner.plan(graph.topo_sort([blob]), placement.axes, None, None, (), planner.sources(placement),
                                  capabilities.supports,
                                  several_axes=capabilities.splits_dim_over_several_axes).sbp[blob]
    return known[key]
