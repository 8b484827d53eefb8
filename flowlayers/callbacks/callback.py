"""Keras' callback protocol: the hooks, the base class, and the list that calls them."""
from .. import env, tensorboard

HOOKS = ("on_train_begin", "on_train_end", "on_epoch_begin", "on_epoch_end", "on_train_batch_begin",
         "on_train_batch_end", "on_test_begin", "on_test_end", "on_test_batch_begin", "on_test_batch_end",
         "on_predict_begin", "on_predict_end", "on_predict_batch_begin", "on_predict_batch_end")


def say(text):
    """A callback's ``verbose`` message, printed by the process that speaks for its job."""
    if env.speaks():
        print(text, flush=True)


class Callback:
    """Base class with Keras' hooks; ``self.model`` and ``self.params`` are set before training.  As in Keras,
    ``on_batch_begin``/``on_batch_end`` are the training batch hooks under their older names."""

    def __init__(self):
        self.model, self.params = None, {}

    def set_model(self, model):
        self.model = model

    def set_params(self, params):
        self.params = params

    def on_train_batch_begin(self, batch, logs=None):
        self.on_batch_begin(batch, logs)

    def on_train_batch_end(self, batch, logs=None):
        self.on_batch_end(batch, logs)

    def on_batch_begin(self, batch, logs=None):
        pass

    def on_batch_end(self, batch, logs=None):
        pass


def _nothing(self, *args, **kwargs):
    pass


for _hook in HOOKS:
    if not hasattr(Callback, _hook):
        setattr(Callback, _hook, _nothing)

# the names a training batch hook is also reached by, through the base classes' forwarding (Keras' too)
_ALIASES = {"on_train_batch_begin": "on_batch_begin", "on_train_batch_end": "on_batch_end"}


def reads_logs(callback, hook):
    """Whether ``callback``'s ``hook`` (a batch or epoch end) may read its logs: it says so (``reads_batch_logs``,
    ``reads_epoch_logs``), or it has a hook of its own under that name or its older alias (``on_batch_end``): set on
    the object (as a LambdaCallback does) or defined by its class, not the no-op of flowlayers' or Keras' base class.
    Where none does, the training loop leaves the metrics on the engine: reading them would wait for the steps."""
    declared = getattr(callback, "reads_batch_logs" if "batch" in hook else "reads_epoch_logs", None)
    if declared is not None:
        return bool(declared)
    return any(_own(callback, name) for name in (hook, _ALIASES.get(hook)) if name)


def _own(callback, name):
    if name in getattr(callback, "__dict__", {}):
        return True
    fn = getattr(type(callback), name, None)
    if fn is None or fn is getattr(Callback, name, None):
        return False
    return not (fn.__qualname__ == f"Callback.{name}" and fn.__module__.startswith("keras."))


class CallbackList:
    """Calls each hook on every callback that has it."""

    def __init__(self, callbacks, model, params):
        self.callbacks = list(callbacks)
        for cb in self.callbacks:
            tensorboard.adapt(cb)      # Keras' TensorBoard: the weights' host values, no graph
            if hasattr(cb, "set_model"):
                cb.set_model(model)
            if hasattr(cb, "set_params"):
                cb.set_params(params)

    def reads_logs(self, hook):
        return any(reads_logs(cb, hook) for cb in self.callbacks)

    def __getattr__(self, hook):
        if hook not in HOOKS:
            raise AttributeError(hook)

        def call(*args):
            for cb in self.callbacks:
                fn = getattr(cb, hook, None)
                if fn is not None:
                    fn(*args)
        return call
