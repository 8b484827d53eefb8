"""What ``compile`` was given, as Keras 3 keeps it in a file (``compile_config`` of a ``.keras`` file,
``training_config`` of a legacy ``.h5`` file), and back into ``model.compile`` arguments.

Keras' words exist for its SGD, Adam, AdamW, RMSprop, Adagrad, Adamax, Nadam, Adadelta, Lion and Ftrl with a number or one of
Keras' schedules as learning rate, for its losses and metrics of the names flowlayers has; a model compiled with
anything else is saved without its compile settings (and its optimizer state), with a warning naming what has no
place.  Reading takes Keras' classes of those names
(or ``custom_objects``), Keras' arguments flowlayers lacks only at the values that leave them off.
"""
from ... import losses as losses_mod, metrics as metrics_mod, optimizers as optimizers_mod
from ...errors import CheckpointError, ConfigError
from . import configs, layer_table

OPTIMIZERS = {cls.__name__: cls for cls in (optimizers_mod.SGD, optimizers_mod.Adam, optimizers_mod.AdamW,
                                             optimizers_mod.RMSprop, optimizers_mod.Adagrad, optimizers_mod.Adamax,
                                             optimizers_mod.Adadelta, optimizers_mod.Lion, optimizers_mod.Nadam,
                                             optimizers_mod.Ftrl)}
#: every loss class of Keras' that flow.losses has (with Keras' names and configs)
LOSSES = {name: cls for name, cls in vars(losses_mod).items() if isinstance(cls, type)
          and issubclass(cls, losses_mod.Loss) and name == cls.__name__
          and cls not in (losses_mod.Loss, losses_mod.LossFunctionWrapper)}
#: every metric class of Keras' that compile takes here (flow.metrics' classes carry Keras' names and configs)
METRICS = {name: cls for name, cls in vars(metrics_mod).items() if isinstance(cls, type)
           and issubclass(cls, metrics_mod.Metric) and name == cls.__name__
           and cls not in (metrics_mod.Metric, metrics_mod.Mean, metrics_mod.Sum, metrics_mod.MeanMetricWrapper,
                           metrics_mod.Deferred)}
SCHEDULES = optimizers_mod.schedules.SCHEDULES
ANY = layer_table.ANY

#: Keras optimizer arguments flowlayers' optimizers lack, at the values that leave them off (Keras 2's too)
OPTIMIZER_NEUTRAL = {"use_ema": (False,), "ema_momentum": ANY, "ema_overwrite_frequency": (None,),
                     "loss_scale_factor": (None,), "amsgrad": (False,), "is_legacy_optimizer": (False,),
                     "decay": (0.0,), "jit_compile": ANY}
KERAS_OPTIMIZER_EXTRAS = {"use_ema": False, "ema_momentum": 0.99, "ema_overwrite_frequency": None,
                          "loss_scale_factor": None}
LOSS_NEUTRAL = {"reduction": ("sum_over_batch_size", "auto"), "ignore_class": (None,), "dtype": (None, "float32"),
                "label_smoothing": (0.0,), "axis": (-1,)}
METRIC_NEUTRAL = {"dtype": (None, "float32")}


# Writing -------------------------------------------------------------------
def compile_config(model):
    """(Keras' compile_config, None) for a model compiled with what Keras has words for; (None, why not) for one
    compiled with something else; (None, None) for a model not compiled."""
    trainer = model.trainer
    opt = model.optimizer
    if opt is None:
        return None, None
    try:
        config = {"optimizer": _optimizer(opt), "loss": None, "loss_weights": None, "metrics": None,
                  "weighted_metrics": None, "run_eagerly": False, "steps_per_execution": trainer.steps_per_execution,
                  "jit_compile": trainer.jit_compile}
        if trainer.heads is None:
            config.update(loss=_loss(model.loss), metrics=[_metric(m, model.loss) for m in model.compiled_metrics]
                          or None, loss_weights=None if trainer.loss_weight == 1.0 else trainer.loss_weight)
        else:
            heads = trainer.heads
            config.update(loss={h.name: _loss(h.loss) for h in heads},
                          loss_weights={h.name: h.weight for h in heads},
                          metrics={h.name: [_metric(m, h.loss, h.name) for m in h.metrics] for h in heads})
    except _NoWords as e:
        return None, str(e)
    unsaved = f"micro_batches={trainer.micro_batches} (Keras has no such setting)" if trainer.micro_batches != 1 \
        else None
    return config, unsaved


class _NoWords(Exception):
    """Something ``compile`` was given that Keras' files have no words for."""


def _optimizer(opt):
    if type(opt) not in OPTIMIZERS.values():
        raise _NoWords(f"optimizer {opt.name!r} is a {type(opt).__name__}, not one of Keras' {sorted(OPTIMIZERS)}")
    schedule = isinstance(opt.learning_rate, optimizers_mod.schedules.LearningRateSchedule)
    if callable(opt.learning_rate) and not (schedule and type(opt.learning_rate) in SCHEDULES.values()):
        raise _NoWords(f"optimizer {opt.name!r} has a learning_rate callable or a schedule of its own class, which "
                       f"is code (Keras' schedules are words: {sorted(SCHEDULES)})")
    config = {**opt.get_config(), **KERAS_OPTIMIZER_EXTRAS}
    if schedule:
        config["learning_rate"] = optimizers_mod.schedules.serialize(opt.learning_rate)
    if isinstance(opt, optimizers_mod.Adam):
        config["amsgrad"] = False
    return _object("keras.optimizers", type(opt).__name__, config)


def _loss(loss):
    if loss is None:
        return None
    name = type(loss).__name__
    if type(loss) not in LOSSES.values():
        raise _NoWords(f"loss {loss.name!r} is a {name}, not one of Keras' {sorted(LOSSES)}")
    return _object("keras.losses", name, loss.get_config())


def _metric(metric, loss, head=None):
    """A metric as Keras keeps it: by name where ``compile`` took a name and would make it again, else as an
    object."""
    name = metric.name[len(head) + 1:] if head else metric.name      # a head's metric is named <output>_<name>
    try:
        by_name = metrics_mod.get(name, loss)
    except ConfigError:     # not a name compile takes
        by_name = None
    if type(by_name) is type(metric) and _unnamed(by_name) == _unnamed(metric):
        return name
    if type(metric) not in METRICS.values():
        raise _NoWords(f"metric {metric.name!r} is a {type(metric).__name__}, not one of Keras' {sorted(METRICS)}")
    return _object("keras.metrics", type(metric).__name__, {**metric.get_config(), "name": name})


def _unnamed(metric):
    return {k: v for k, v in metric.get_config().items() if k != "name"}


def _object(module, class_name, config):
    return {"module": module, "class_name": class_name, "config": config, "registered_name": None}


# Reading -------------------------------------------------------------------
def compile_arguments(config, custom_objects, where):
    """``model.compile`` arguments from Keras' compile_config (or a legacy file's training_config)."""
    who = f"{where}: the saved compile settings"
    if not isinstance(config, dict):
        raise CheckpointError(f"{who}: expected a dict, received {type(config).__name__}")
    if config.get("weighted_metrics"):
        raise CheckpointError(f"{who}: weighted_metrics={config['weighted_metrics']!r} is not supported by "
                              f"flowlayers' compile; expected none (load with compile=False and compile again)")
    if config.get("run_eagerly"):
        raise CheckpointError(f"{who}: run_eagerly=True is not supported (flowlayers compiles every step); "
                              f"expected False (load with compile=False and compile again)")
    optimizer = config.get("optimizer", config.get("optimizer_config"))     # Keras 3 / a legacy training_config
    out = {"optimizer": _read_optimizer(optimizer, custom_objects, who),
           "loss": _read_each(config.get("loss"), lambda v: _read_loss(v, custom_objects, who)),
           "metrics": _read_each(config.get("metrics"), lambda v: _read_metric(v, custom_objects, who), lists=True),
           "loss_weights": config.get("loss_weights")}
    if "steps_per_execution" in config:
        out["steps_per_execution"] = config["steps_per_execution"]
    if isinstance(config.get("jit_compile"), bool):
        out["jit_compile"] = config["jit_compile"]
    return out


def _read_each(value, read, lists=False):
    """``read`` applied to one entry, each entry of a list, or each value of a dict by output."""
    if value is None:
        return None
    if isinstance(value, dict) and "class_name" not in value:
        return {k: _read_each(v, read, lists) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_read_each(v, read) for v in value]
    return read(value)


def _read_optimizer(spec, custom_objects, who):
    if isinstance(spec, str):
        return spec
    cls, config = _class(spec, custom_objects, OPTIMIZERS, "optimizer", who)
    if cls not in OPTIMIZERS.values():
        return cls(**config)
    if isinstance(config.get("learning_rate"), dict):
        config = {**config, "learning_rate": _read_schedule(config["learning_rate"], custom_objects, who)}
    return cls(**configs.read_arguments(cls, config, OPTIMIZER_NEUTRAL, f"{who}: optimizer"))


def _read_schedule(spec, custom_objects, who):
    """A learning rate schedule: Keras' classes by name (flow.optimizers.schedules), or ``custom_objects``."""
    cls, config = _class(spec, custom_objects, SCHEDULES, "learning_rate schedule", who)
    return cls.from_config(config)


def _read_loss(spec, custom_objects, who):
    if isinstance(spec, str):
        return spec
    cls, config = _class(spec, custom_objects, LOSSES, "loss", who)
    if cls not in LOSSES.values():
        return cls(**config)
    return cls(**configs.read_arguments(cls, config, LOSS_NEUTRAL, f"{who}: loss"))


def _read_metric(spec, custom_objects, who):
    if isinstance(spec, str):
        return spec
    cls, config = _class(spec, custom_objects, METRICS, "metric", who)
    if cls not in METRICS.values():
        return cls(**config)
    return cls(**configs.read_arguments(cls, config, METRIC_NEUTRAL, f"{who}: metric"))


def _class(spec, custom_objects, table, kind, who):
    """(class, config) of a Keras object entry: ``custom_objects`` first, else flowlayers' class of a Keras class
    name; any other is refused by name (no code is loaded)."""
    if not isinstance(spec, dict) or not isinstance(spec.get("class_name"), str):
        raise CheckpointError(f"{who}: {kind} expected a name or a {{'class_name', 'config'}} entry, received "
                              f"{configs._brief(spec)}")
    class_name, config = spec["class_name"], spec.get("config") or {}
    for key in (spec.get("registered_name"), class_name):
        if key in custom_objects:
            return custom_objects[key], config
    if configs.is_keras_module(spec.get("module") or "") and class_name in table:
        return table[class_name], config
    raise CheckpointError(f"{who}: {kind} of class {class_name!r} (module {spec.get('module')!r}) is not one "
                          f"flowlayers has; expected one of {sorted(table)} or the class in custom_objects (or load "
                          f"with compile=False and compile again)")
