"""Placement: where and how a program runs, as one immutable value.

``flow.config`` holds settings a user may change at any time; what runs takes them once, as a Placement, when it
is compiled or called (``config.placement()``), and hands that value down: to the planner, to the variables'
layouts and seeds, and to the backend, which never reads ``flow.config``.  Two programs compiled under different
settings hold different Placements, so a setting changed between them cannot reach one half-way.
"""
import re
from dataclasses import dataclass
from typing import Optional, Tuple

from ..errors import SBPError
from .cluster import Cluster


@dataclass(frozen=True)
class Placement:
    backend: str              # the engine's entry-point name
    view: str                 # "consistent" | "mirrored"
    device_num: int           # devices of all processes
    mesh: Tuple = ()          # ((axis, size), ...): the consistent view's mesh; () in the mirrored view
    layout_rules: Tuple = ()  # ((regex, per-dim mesh axes), ...), in the order they were given
    seed: int = 0
    cluster: Optional[Cluster] = None   # the processes of a launched job; None: this process alone

    @property
    def consistent(self):
        return self.view == "consistent"

    @property
    def axes(self):
        """The mesh as ``[(axis, size), ...]``; the mirrored view's replicas are one axis ``replica``."""
        return list(self.mesh) if self.consistent else [("replica", self.device_num)]

    @property
    def runtime_key(self):
        """What decides the runtime (devices and mesh); rules and seed are per program."""
        return self.backend, self.view, self.device_num, self.mesh, self.cluster

    def rules(self):
        return dict(self.layout_rules)

    def variable_sbp(self, var):
        """``var``'s nd-SBP on this placement's mesh (consistent view), from its layout; None in the mirrored
        view, where every replica holds it whole."""
        return var.nd_sbp(dict(self.mesh), self.rules()) if self.consistent else None

    def check_rules(self, variables, others=()):
        """Every layout rule must fit each of ``variables`` it matches and match one of them or of ``others`` (live
        variables of other models: a rule may be meant for another model).  Runs before anything moves."""
        if not self.consistent:
            return
        mesh, rules = dict(self.mesh), self.rules()
        variables = [v for v in variables if v.layout_of is None]
        for v in variables:
            v.mesh_spec(mesh, rules)
        candidates = variables + [v for v in others if v.layout_of is None]
        for pattern in rules:
            if not any(re.search(pattern, v.path) for v in candidates):
                paths = sorted({v.path for v in variables})
                raise SBPError(f"layout rule {pattern!r}: expected to match at least one variable, received none "
                               f"among {paths[:8]}{' ...' if len(paths) > 8 else ''} (rules match variable paths "
                               f"with re.search); fix the pattern or remove the rule")
