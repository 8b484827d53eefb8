"""LambdaCallback: a callback made of functions (Keras 3's callback)."""
from ..errors import ConfigError
from .callback import HOOKS, Callback


class LambdaCallback(Callback):
    """Each argument is the function a hook calls, with the hook's arguments: ``on_epoch_begin(epoch, logs)``,
    ``on_train_batch_end(batch, logs)``, ``on_train_begin(logs)``...  Keyword arguments give any other hook of Keras'
    (``on_test_batch_end=...``, ``on_batch_end=...``); another name is refused."""

    def __init__(self, on_epoch_begin=None, on_epoch_end=None, on_train_begin=None, on_train_end=None,
                 on_train_batch_begin=None, on_train_batch_end=None, **kwargs):
        super().__init__()
        hooks = set(HOOKS) | {"on_batch_begin", "on_batch_end"}
        unknown = sorted(set(kwargs) - hooks)
        if unknown:
            raise ConfigError(f"LambdaCallback: unexpected keyword argument(s) {unknown}; expected hooks among "
                              f"{sorted(hooks)}")
        given = dict(on_epoch_begin=on_epoch_begin, on_epoch_end=on_epoch_end, on_train_begin=on_train_begin,
                     on_train_end=on_train_end, on_train_batch_begin=on_train_batch_begin,
                     on_train_batch_end=on_train_batch_end, **kwargs)
        for hook, fn in given.items():
            if fn is None:
                continue
            if not callable(fn):
                raise ConfigError(f"LambdaCallback: {hook} expected a function, received {fn!r}")
            setattr(self, hook, fn)
