"""TerminateOnNaN: stop ``fit`` at the first batch whose loss is NaN or infinite (Keras 3's callback)."""
import math

from .callback import Callback, say


class TerminateOnNaN(Callback):
    """Stop training after a batch with a NaN or infinite ``loss``; ``raise_error=True`` raises a RuntimeError
    instead (the weights are those of that step).  It reads the loss after every batch, which waits for each step."""

    def __init__(self, raise_error=False):
        super().__init__()
        self.raise_error = raise_error

    def on_batch_end(self, batch, logs=None):
        loss = (logs or {}).get("loss")
        if loss is None:
            return
        loss = float(loss)      # a value still on the engine (metrics.Deferred) is read here
        if math.isfinite(loss):
            return
        if self.raise_error:
            raise RuntimeError(f"NaN or Inf loss encountered at batch {batch}. Loss value: {loss}. Terminating "
                               f"training immediately.")
        say(f"Batch {batch}: Invalid loss, terminating training")
        self.model.stop_training = True
