"""A Program compiled for one Placement: planned once, its variables bound, the backend's step called.

The front end does everything that is not the engine's: it checks the layout rules, runs the planner (against
what the backend declares it ``supports``) and keeps one plan per fed batch size, which the backend's executable,
``model.summary()`` and ``parallel_plan()`` all read; it makes sure every variable's value lives in the runtime,
in the layout the placement gives it, and hands the engine handles to each step.
"""
import weakref

from .. import config, contract, engine, env
from ..parallel import plan as planner
from ..sbp import Split, broadcast
from .graph import topo_sort
from .variable import live_variables, moves as live_moves

_live = weakref.WeakSet()     # compiled programs, whose plans Blob.sbp reads first


class Compiled:
    def __init__(self, program, placement):
        env.heartbeat(steps=0)      # a stage every process passes: the launcher's watch counts it
        self.program, self.placement = program, placement
        self.runtime = engine.runtime(placement)
        placement.check_rules(program.variables, live_variables())     # before any variable moves
        self.slot_vars = program.slots()
        self.variables = list(program.variables) + [s for slots in self.slot_vars.values() for s in slots]
        self._plans, self._handles, self._moved = {}, None, None
        self._sources = planner.sources(placement.variable_sbp) if placement.consistent else _replicas
        self._supports, self._several = capabilities(placement)
        self._nodes = {id(n) for n in program.nodes}
        if placement.consistent:
            self.plan(None)     # forced signatures and constraints are checked before any step
        self.executable = self.runtime.compile(program, self.plan if placement.consistent else None, placement.seed)
        _live.add(self)

    def plan(self, batch=None):
        """The Plan for ``batch`` fed rows (None: the placeholders' own batch dims), made once per size."""
        if batch not in self._plans:
            p = self.program
            self._plans[batch] = planner.plan(p.nodes, self.placement.axes, batch, p.loss, p.trainable,
                                              self._sources, self._supports, several_axes=self._several)
        return self._plans[batch]

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
        not run (the executable's optional ``compiled_text``: ask ``hasattr`` first)."""
        lr, step = (0.0, 1) if optimizer is None else _rate_and_step(optimizer)
        return self.executable.compiled_text(feeds, self.handles(), lr, step)

    def run_steps(self, feeds, count, optimizer=None):
        """``count`` steps in one call (``contract.run_steps``: per input a ``Rows`` or an array stacked over the
        steps), each at its step's learning rate.  Returns per output its values stacked over the steps."""
        first = 1 if optimizer is None else optimizer.iterations + 1
        lrs = [0.0 if optimizer is None else optimizer.learning_rate_at(first + k - 1) for k in range(count)]
        env.heartbeat(count)
        values = contract.run_steps(self.executable, feeds, self.handles(), lrs, first)
        if optimizer is not None:
            optimizer.iterations += count
        return values


def _rate_and_step(optimizer):
    """The learning rate and number of ``optimizer``'s next step."""
    return optimizer.current_learning_rate(), optimizer.iterations + 1


def planned_sbp(blob):
    """``Blob.sbp``: the Blob's nd-SBP in the plan of a program compiled on the placement in force that holds it
    (the plan its steps run), else in the plan of the graph that makes it; None in the mirrored view."""
    placement = config.placement()
    if not placement.consistent:
        return None
    for compiled in list(_live):
        if compiled.placement == placement and id(blob.node) in compiled._nodes:
            return compiled.plan(None).sbp[blob]
    supports, several = capabilities(placement)
    return planner.plan(topo_sort([blob]), placement.axes, None, None, (), planner.sources(placement.variable_sbp),
                        supports, several_axes=several).sbp[blob]


def capabilities(placement):
    """What the planner asks of the placement's backend: ``supports(op_name, signature)`` (None: every
    signature) and whether it can split one tensor dim over several mesh axes."""
    backend = engine.backend(placement.backend)
    return getattr(backend, "supports", None), bool(getattr(backend, "splits_dim_over_several_axes", False))


def _replicas(node, axes, batch=None):
    """The mirrored view as a plan sees it: every replica holds whole variables; the batch is split over them."""
    if node.op.kind == "variable":
        return (broadcast,)
    return (Split(0),) if node.outputs[0].shape else (broadcast,)
