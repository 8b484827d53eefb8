"""Views: ``consistent`` (one logical tensor over a mesh) and ``mirrored`` (one replica per device).

A view is a plain value.  It is used in three interchangeable ways::

    flow.config.set_view("mirrored")                       # process default
    cfg.default_logical_view(flow.scope.mirrored_view())   # one job function
    with flow.scope.mirrored_view():                       # everything built inside
        model = build_model()
"""
from .errors import ConfigError

VIEWS = ("consistent", "mirrored")
_stack = []


class View:
    __slots__ = ("name",)

    def __init__(self, name):
        if name not in VIEWS:
            raise ConfigError(f"view: expected one of {list(VIEWS)}, received {name!r}; use one of those names")
        self.name = name

    def __enter__(self):
        _stack.append(self.name)
        return self

    def __exit__(self, *exc):
        _stack.pop()

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


def as_view_name(view, what="view"):
    """A View, or its name, -> the name; anything else is an error naming ``what``."""
    if isinstance(view, View):
        return view.name
    if isinstance(view, str) and view in VIEWS:
        return view
    raise ConfigError(f"{what}: expected one of {list(VIEWS)} (or flow.scope.<name>_view()), received {view!r}; "
                      f"use one of those names (FLOWLAYERS_VIEW takes the same)")


def scoped_view():
    """The view of the innermost ``with`` view scope, or None."""
    return _stack[-1] if _stack else None
