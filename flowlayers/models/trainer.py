"""What ``compile`` gives a model and ``fit`` uses, in one object: ``model.trainer``.

It holds the compile settings (optimizer, losses and metrics per output, ``jit_compile``, ``micro_batches``,
``steps_per_execution``), the steps compiled from them (one per phase, placement, set of trainable weights and
sample weighting), the optimizer's state in checkpoints (saved, restored, or held until an optimizer comes) and
where a ``fit`` is.  ``training.py``, ``saving.py`` and the callbacks use this surface; the model keeps Keras'
attribute names (``model.optimizer``, ``model.loss``, ``model.compiled_metrics``) as views of it.
"""
import contextlib

from .. import dtypes, losses as losses_mod, metrics as metrics_mod, optimizers as optimizers_mod, regularizers
from .. import engine, settings
from ..errors import GraphError, InputError
from ..framework import checkpoint_format as checkpoint
from ..framework.compiled import Compiled
from ..framework.graph import placement_scope
from ..framework.program import build as build_program
from ..ops import source
from ..ops.reduce import reduce_mean
from ..ops.shape import reshape
from . import heads as heads_mod


class Trainer:
    def __init__(self, model):
        self.model = model
        self.optimizer, self.loss, self.metrics = None, None, []
        self.heads, self.loss_weight = None, 1.0       # heads: one per output of a model of several (heads.py)
        self.jit_compile, self.micro_batches, self.steps_per_execution = False, 1, 1
        self.loss_tracker = None    # the "loss" Mean of model.metrics (a custom train_step updates it)
        self.fit_state = None       # training.FitState while a fit runs (BackupAndRestore reads and resumes it)
        self.forget_steps()
        self._deferred = None       # optimizer state of a checkpoint loaded before compile

    # Compile ---------------------------------------------------------------
    def compile(self, optimizer, loss, loss_weights, metrics, jit_compile, micro_batches, steps_per_execution):
        model, where = self.model, f"Model {self.model.name!r}.compile"
        if isinstance(micro_batches, bool) or not isinstance(micro_batches, int) or micro_batches < 1:
            raise InputError(f"{where}: micro_batches expected a positive int, received {micro_batches!r}")
        if isinstance(steps_per_execution, bool) or not isinstance(steps_per_execution, int) or \
                steps_per_execution < 1:
            raise InputError(f"{where}: steps_per_execution expected a positive int, received "
                             f"{steps_per_execution!r}")
        optimizer = optimizers_mod.get(optimizer)
        if model.dtype_policy.name == "mixed_float16" and not isinstance(optimizer,
                                                                         optimizers_mod.LossScaleOptimizer):
            # Keras: a mixed_float16 model trains with dynamic loss scaling
            optimizer = optimizers_mod.LossScaleOptimizer(optimizer, name="loss_scale_optimizer")
        if model.built and len(model.outputs) > 1 and loss is not None:
            self.heads = heads_mod.make_heads(model, loss, loss_weights, metrics)
            self.loss, self.metrics = [h.loss for h in self.heads], [m for h in self.heads for m in h.metrics]
        else:
            self.heads = None
            if isinstance(loss, (list, tuple, dict)):       # one output: a list or dict of one, as Keras takes it
                loss = _only(loss, "loss", model)
            weight = _only(loss_weights, "loss_weights", model) if isinstance(loss_weights, (list, tuple, dict)) \
                else loss_weights
            if weight is not None and (isinstance(weight, bool) or not isinstance(weight, (int, float))):
                raise InputError(f"{where}: loss_weights expected a number, received {weight!r}")
            self.loss_weight = 1.0 if weight is None else float(weight)
            self.loss = losses_mod.get(loss) if loss is not None else None
            self.metrics = [metrics_mod.get(m, self.loss) for m in (metrics or [])]
        self.optimizer = optimizer
        self.loss_tracker = metrics_mod.Mean(name="loss")      # Keras' model.metrics[0] once compiled
        self.jit_compile, self.micro_batches = bool(jit_compile), micro_batches
        self.steps_per_execution = steps_per_execution
        self.forget_steps()

    @property
    def compiled(self):
        """Whether the model has a loss and an optimizer to train with."""
        return self.loss is not None and self.optimizer is not None

    @property
    def metrics_names(self):
        """The labels of what ``evaluate`` returns, in order: ``["loss", <metric names>]`` once compiled."""
        if self.loss is None:
            return []
        losses = [f"{h.name}_loss" for h in self.heads if h.loss is not None] if self.heads else []
        return ["loss"] + losses + [m.name for m in self.metrics]

    # Steps -----------------------------------------------------------------
    def step(self, phase, weighted=False, placement=None):
        """The compiled step for ``phase`` on ``placement`` (default: the settings in force), built once per
        placement, per set of trainable weights - freezing a layer takes effect at the next fit, as a compile does
        in Keras - and with or without sample weights."""
        model = self.model
        placement = placement or engine.placement()
        key = (phase, placement, tuple(w.trainable for w in model.weights) if phase == "train" else (), weighted)
        if key not in self._steps:
            self._steps[key] = Compiled(self.program(phase, weighted), placement)
        return self._steps[key]

    def forget_steps(self):
        """Drop the compiled steps (a new compile, a model rebuilt): the next ``step`` compiles again."""
        self._steps = {}
        self.custom_stages = {}     # a custom train_step / test_step / predict_step traced (custom_fit.py)

    def program(self, phase, weighted=False):
        """The Program of ``phase``: the model's outputs (predict), or its loss and metrics summed over the batch
        (train, eval)."""
        model = self.model
        if phase == "predict":
            return build_program(model.inputs, model.outputs, ["numpy"] * len(model.outputs), "predict",
                                 jit_compile=self.jit_compile, name=f"{model.name}.predict")
        if self.loss is None:
            raise GraphError(f"Model {model.name!r}: {'fit' if phase == 'train' else 'evaluate'} needs a loss; "
                             f"call model.compile(optimizer=..., loss=...) first")
        if self.heads is None and len(model.outputs) != 1:
            raise GraphError(f"Model {model.name!r}: fit/evaluate of a model with {len(model.outputs)} outputs "
                             f"expected it compiled with a loss per output (compile(loss=[...]) or a dict by output "
                             f"name)")
        # outputs made under one flow.scope.placement: the loss and metrics are computed there too
        placed = {b.node.placement for b in model.outputs}
        with placement_scope(placed.pop()) if len(placed) == 1 and None not in placed else contextlib.nullcontext():
            return self._loss_program(phase, weighted)

    def _loss_program(self, phase, weighted):
        model = self.model
        weight = source.placeholder((None,), dtypes.float32, f"{model.name}/sample_weight") if weighted else None

        def weighed(per_example):   # Keras: weighted per-sample losses summed over the batch size; metrics stay
            return per_example if weight is None else per_example * reshape(weight, (None,) + (1,) * (
                per_example.ndim - 1))

        if self.heads is None:
            label = self._label_placeholder()
            labels, per_example = [label], weighed(_per_example(self.loss(label, model.outputs[0])))
            if self.loss_weight != 1.0:
                per_example = per_example * self.loss_weight
            head_losses = []
            metric_blobs = [s for m in self.metrics for s in m.statistics(label, model.outputs[0])]
        else:
            labels, head_losses, metric_blobs, per_example = [], [], [], None
            for h in self.heads:
                if h.loss is None:          # an output without a loss takes no labels
                    continue
                out, label = model.outputs[h.index], self._label_placeholder(h)
                labels.append(label)
                head_losses.append(weighed(_per_example(h.loss(label, out))))
                share = head_losses[-1] * h.weight if h.weight != 1.0 else head_losses[-1]
                per_example = share if per_example is None else per_example + share
                metric_blobs += [s for m in h.metrics for s in m.statistics(label, out)]
        for term in model.losses:       # add_loss terms (scalars), added to every example: their mean gains each once
            per_example = per_example + term
        per_example = regularizers.penalized(per_example)     # Keras: the reported loss includes the penalties
        outputs = [per_example] + head_losses + metric_blobs
        train = phase == "train"
        return build_program(model.inputs + labels + ([weight] if weighted else []), outputs,
                             ["sum"] * len(outputs), phase, loss=per_example if train else None,
                             optimizer=self.optimizer if train else None, jit_compile=self.jit_compile,
                             name=f"{model.name}.{phase}", micro_batches=self.micro_batches if train else 1)

    def _label_placeholder(self, head=None):
        """The labels' placeholder of the only output, or of ``head``'s output (one with a loss)."""
        model = self.model
        if head is None:
            shape, dtype = self.loss.label_spec(model.outputs[0])
            return source.placeholder(shape, dtype, f"{model.name}/labels")
        shape, dtype = head.loss.label_spec(model.outputs[head.index])
        return source.placeholder(shape, dtype, f"{model.name}/{head.name}/labels")

    # Checkpoints -----------------------------------------------------------
    def optimizers(self):
        """owner -> (optimizer, the variables it trains): what a checkpoint holds the state of."""
        if self.optimizer is None:
            return {}
        return {self.optimizer.name: (self.optimizer, self.model.trainable_weights)}

    def restore_deferred(self):
        """Give the optimizer the state a checkpoint loaded before it came held (``load_weights`` before
        ``compile``); kept until it lands, so that a failure (its files changed) can be retried."""
        if self._deferred is not None and self.optimizer is not None:
            self._deferred.apply(self.optimizer.name, self.optimizer, self.model.trainable_weights)
            self._deferred = None

    def checkpoint_variables(self):
        """Checkpoint key -> Variable: the weights by path, then the optimizer's slots."""
        self.restore_deferred()
        variables = {w.path: w for w in self.model.weights}
        variables.update(checkpoint.slot_variables(self.optimizers()))
        return variables

    def save_checkpoint(self, filepath, position=None, extra_state=None, seed=None):
        """Weights, optimizer state and step (and ``position``: where a fit is) into checkpoint ``filepath``, with
        ``seed``: the run's (default: the seed set now)."""
        self.model.require_built("save_weights")
        variables = self.checkpoint_variables()
        state = checkpoint.state(self.optimizers(), settings.seed() if seed is None else seed, position)
        checkpoint.save(filepath, variables, {**state, **(extra_state or {})})

    def load_checkpoint(self, filepath):
        """Restore weights and optimizer state; returns the checkpoint's state (its ``position`` for resuming)."""
        model = self.model
        model.require_built("load_weights")
        weights = {w.path: w for w in model.weights}
        if self.optimizer is None:
            reader, self._deferred = checkpoint.restore_before_compile(filepath, weights, model.trainable_weights)
            return reader.state
        self._deferred = None       # the optimizer's state comes from this checkpoint
        return checkpoint.restore(filepath, weights, self.optimizers()).state


def _per_example(values):
    """Each example's mean over its other axes: a per-token loss or metric averages over every token, as Keras
    reduces it (the host then averages the examples)."""
    return reduce_mean(values, axis=list(range(1, values.ndim))) if values.ndim > 1 else values


def _only(value, what, model):
    """The one entry of a list or dict given for a model with one output."""
    items = list(value.values()) if isinstance(value, dict) else list(value)
    if len(items) != 1:
        raise InputError(f"Model {model.name!r}.compile: {what} expected one entry for the model's one output, "
                         f"received {len(items)}: {value!r}")
    if isinstance(value, dict) and model.built and list(value) != model.output_names:
        raise InputError(f"Model {model.name!r}.compile: {what} names output {list(value)}, expected "
                         f"{model.output_names}")
    return items[0]
