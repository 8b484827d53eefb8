"""The heads of a model with several outputs: per output its loss, loss weight and metrics, as Keras 3 reads
``compile(loss=..., loss_weights=..., metrics=...)``.

    model.compile("adam", loss={"cls": "sparse_categorical_crossentropy", "reg": "mse"},
                  loss_weights={"cls": 1.0, "reg": 0.5}, metrics={"cls": ["accuracy"]})

``loss`` is one loss for every output, a list (one per output, None for none) or a dict by output name (an output
left out has no loss); ``loss_weights`` a list or a dict (default 1); ``metrics`` a list of lists or a dict.  The
model's loss is the weighted sum of the outputs' mean losses; each output's own loss is reported unweighted as
``<output>_loss`` and its metrics as ``<output>_<metric>``, in that order after ``loss``.
"""
from dataclasses import dataclass, field
from typing import List

from .. import losses as losses_mod, metrics as metrics_mod
from ..errors import ConfigError


@dataclass
class Head:
    index: int                  # which output
    name: str                   # the output's name (its layer's)
    loss: object = None         # a flow.losses.* instance, or None: this output is not trained on
    weight: float = 1.0
    metrics: List = field(default_factory=list)


def make_heads(model, loss, loss_weights, metrics):
    names, what = model.output_names, f"Model {model.name!r}.compile"
    losses = _per_output(loss, names, "loss", what)
    weights = _per_output(loss_weights, names, "loss_weights", what)
    if metrics is not None and isinstance(metrics, (list, tuple)) and metrics \
            and not all(m is None or isinstance(m, (list, tuple)) for m in metrics):
        raise ConfigError(f"{what}: metrics expected, for a model with {len(names)} outputs {names}, a list with one "
                          f"list of metrics per output or a dict by output name, received {metrics!r}")
    per_metrics = _per_output(metrics, names, "metrics", what) if metrics is not None else [None] * len(names)
    heads = []
    for i, name in enumerate(names):
        rule = losses_mod.get(losses[i]) if losses[i] is not None else None
        weight = 1.0 if weights[i] is None else weights[i]
        if isinstance(weight, bool) or not isinstance(weight, (int, float)):
            raise ConfigError(f"{what}: loss_weights for output {name!r} expected a number, received {weight!r}")
        if rule is None and per_metrics[i]:
            raise ConfigError(f"{what}: metrics for output {name!r} expected with a loss for it, received none; "
                              f"give that output a loss, or no metrics")
        tracked = [metrics_mod.get(m, rule) for m in (per_metrics[i] or [])]
        for m in tracked:
            m.name = f"{name}_{m.name}"
        heads.append(Head(i, name, rule, float(weight), tracked))
    if all(h.loss is None for h in heads):
        raise ConfigError(f"{what}: loss expected for at least one of the outputs {names}, received {loss!r}")
    return heads


def _per_output(value, names, what, where):
    """``value`` for each output: the same for all, one per output from a list, or by name from a dict."""
    if value is None or not isinstance(value, (list, tuple, dict)):
        return [value] * len(names)
    if isinstance(value, dict):
        unknown = sorted(k for k in value if k not in names)
        if unknown:
            raise ConfigError(f"{where}: {what} names outputs {unknown}, expected among the output names {names}")
        return [value.get(n) for n in names]
    if len(value) != len(names):
        raise ConfigError(f"{where}: {what} expected {len(names)} entries, one per output {names}, received "
                          f"{len(value)}")
    return list(value)
