"""One exception hierarchy for every user mistake.

Each class is also the builtin exception a Python user would catch for that
kind of mistake, so ``except ValueError`` keeps working.  Messages name the
thing (placeholder, layer, variable, rule, mesh axis), what was expected,
what was received and, where it helps, how to fix it.
"""


class FlowLayersError(Exception):
    """Root of every error flowlayers raises for a user mistake."""

    # Exception's own __init__ (not ValueError's or RuntimeError's): TF autograph re-raises an error from
    # traced code as its own type only when the type's __init__ is Exception.__init__; otherwise the user
    # gets a StagingError instead of, say, the EngineError a kernel raised while a step was traced
    __init__ = Exception.__init__


class ConfigError(FlowLayersError, ValueError):
    """A config value (view, backend, device count, mesh) is invalid."""


class ShapeError(FlowLayersError, ValueError):
    """A Blob, placeholder or array has a shape other than the one expected."""


class DTypeError(FlowLayersError, TypeError):
    """A Blob, placeholder or array has a dtype other than the one expected."""


class InputError(FlowLayersError, ValueError):
    """Arguments passed to a job function, ``fit``, ``evaluate`` or ``predict`` are wrong."""


class LayerError(FlowLayersError, ValueError):
    """A layer was constructed or called wrongly."""


class GraphError(FlowLayersError, ValueError):
    """The logical graph is not well formed (disconnected input, unknown op...)."""


class SBPError(FlowLayersError, ValueError):
    """An SBP constraint or layout rule cannot be honoured."""


class CheckpointError(FlowLayersError, ValueError):
    """A checkpoint does not match the model or is damaged."""


class EngineError(FlowLayersError, RuntimeError):
    """The engine failed while running a layer or op; the message names it."""


def describe_shape(shape):
    """``(None, 28, 28)`` -> ``'(None, 28, 28)'``, keeping one-tuples readable."""
    shape = tuple(shape)
    return "(" + ", ".join("None" if d is None else str(d) for d in shape) + ("," if len(shape) == 1 else "") + ")"
