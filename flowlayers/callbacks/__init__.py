"""Callbacks: Keras' protocol, driven without importing Keras.

flowlayers' own callbacks keep Keras 3's names, arguments and behaviour; any object with Keras' hook methods works
as well (``keras.callbacks.*`` and your own).
"""
from .. import missing
from ..errors import ConfigError
from .backup import BackupAndRestore
from .callback import HOOKS, Callback, CallbackList, reads_logs
from .csv_logger import CSVLogger
from .early_stopping import EarlyStopping
from .history import History
from .lambda_callback import LambdaCallback
from .learning_rate import LearningRateScheduler, ReduceLROnPlateau
from .model_checkpoint import ModelCheckpoint
from .monitor import MonitorCallback
from .progbar import ProgbarLogger
from .terminate_on_nan import TerminateOnNaN


def __getattr__(name):
    """A Keras ``callbacks`` name flowlayers lacks: a ConfigError naming it and what to use instead."""
    return missing.refuse("callbacks", name, ConfigError, globals())
