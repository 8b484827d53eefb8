"""Views: ``consistent`` (one logical tensor over a mesh) and ``mirrored`` (one replica per device).

A view is a plain value.  It is used in three interchangeable ways::

    flow.config.set_view("mirrored")                       # process default
    cfg.default_logical_view(flow.scope.mirrored_view())   # one job function
    with flow.scope.mirrored_view():                       # everything built inside
        model = build_model()
"""
import re

from . import settings
from .errors import ConfigError
from .framework import graph
from .settings import VIEWS, as_view_name  # noqa: F401  (flow.scope's names since OneFlow)


class View:
    __slots__ = ("name",)

    def __init__(self, name):
        if name not in VIEWS:
            raise ConfigError(f"view: expected one of {list(VIEWS)}, received {name!r}; use one of those names")
        self.name = name

    def __enter__(self):
        settings.push_view(self.name)
        return self

    def __exit__(self, *exc):
        settings.pop_view()

    def __eq__(self, other):
        return isinstance(other, View) and other.name == self.name

    def __hash__(self):
        return hash(self.name)

    def __repr__(self):
        return f"flow.scope.{self.name}_view()"


def consistent_view():
    return View("consistent")


def mirrored_view():
    return View("mirrored")


class placement:  # noqa: N801 - OneFlow's name
    """OneFlow's ``flow.scope.placement(device_tag, machine_device_ids)``: the devices the ops and variables
    built inside run on.  ``device_tag`` is ``"gpu"`` or ``"cpu"``; ``machine_device_ids`` ``"0:0-3"``, ``"0:1"``
    or a list of them.  A placement covering every device in use (``gpu_device_num``) is what flowlayers does
    anyway, in either view.  A placement on a subset of them (OneFlow's model-parallel pipeline: a layer on
    ``"0:0"``, the next on ``"0:1"``) places those ops and variables there in the consistent view, each Blob whole
    on each of its devices, with a transfer between placements that ``parallel_plan()`` lists; the mirrored view
    (one replica of the whole model per device) and other machines refuse it by name."""

    def __init__(self, device_tag, machine_device_ids):
        what = f"flow.scope.placement({device_tag!r}, {machine_device_ids!r})"
        if device_tag not in ("gpu", "cpu"):
            raise ConfigError(f"{what}: device_tag expected 'gpu' or 'cpu', received {device_tag!r}")
        self.what, self.devices = what, _device_ids(machine_device_ids, what)
        self._scope = None

    def __enter__(self):
        n = settings.device_num()
        if self.devices == {(0, d) for d in range(n)}:
            return self
        outside = sorted(d for d in self.devices if d[0] != 0 or d[1] >= n)
        if outside:
            raise ConfigError(f"{self.what}: expected devices of machine 0 among the {n} in use (0:0-{n - 1}, "
                              f"flow.config.gpu_device_num({n})), received {['%d:%d' % d for d in outside]}; "
                              f"use devices in that range (several machines: see flowlayers' launcher)")
        if settings.view() != "consistent" or len(settings.mesh_shape()) != 1:
            raise ConfigError(f"{self.what}: a placement on some of the {n} devices expected the consistent view "
                              f"with a one-axis mesh, received the {settings.view()} view"
                              f"{'' if settings.view() != 'consistent' else ' with mesh ' + str(settings.mesh_shape())}; "
                              f"the mirrored view keeps a whole replica on every device: use the consistent view, "
                              f"or '0:0-{n - 1}'")
        self._scope = graph.placement_scope(tuple(sorted(d for _, d in self.devices)))
        self._scope.__enter__()
        return self

    def __exit__(self, *exc):
        if self._scope is not None:
            scope, self._scope = self._scope, None
            scope.__exit__(*exc)
        return False


def _device_ids(ids, what):
    """``"m:a-b"`` / ``"m:a"`` or a list of them -> {(machine, device)}."""
    items = ids if isinstance(ids, (list, tuple)) else [ids]
    out = set()
    for item in items:
        match = re.fullmatch(r"(\d+):(\d+)(?:-(\d+))?", item) if isinstance(item, str) else None
        if match is None or (match.group(3) and int(match.group(3)) < int(match.group(2))):
            raise ConfigError(f"{what}: machine_device_ids expected 'machine:device' or 'machine:first-last' "
                              f"(e.g. '0:0-3'), or a list of them, received {item!r}")
        machine, first = int(match.group(1)), int(match.group(2))
        out.update((machine, d) for d in range(first, int(match.group(3) or first) + 1))
    return out


def recompute():
    """Activation recomputation (gradient checkpointing): the ops built inside form a segment whose activations a
    training step does not keep; the backward pass computes them again from the segment's inputs, which are kept.

        for i in range(blocks):
            with flow.recompute():
                h = block(h)

    A step then holds, per segment, its inputs and outputs instead of every activation inside, for one more
    forward pass of each segment; the results are the same.  Prediction and evaluation are unaffected."""
    return graph.recompute_scope()
