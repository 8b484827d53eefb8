"""One thread at a time inside a model's ``fit``, ``evaluate``, ``predict`` and ``*_on_batch``.

A step replaces the model's variables (the jax backend donates their buffers to the step), so steps of a second
thread on the same model would read buffers given away already, or interleave with the first thread's steps and
end at weights neither run would give.  The thread inside may call in again: a callback that evaluates the model
inside ``fit``."""
import contextlib
import threading

from ..errors import InputError

_lock = threading.Lock()     # each check-and-set below is atomic


@contextlib.contextmanager
def alone(model, method):
    """Run the body as ``model``'s ``method`` (``"fit"``, ``"predict"``...), refused by name while another thread
    is inside one of these methods on the same model; the call already running goes on undisturbed."""
    me = threading.current_thread()
    with _lock:
        held = getattr(model, "_running", None)     # (thread, the method it entered first, depth)
        if held is not None and held[0] is not me:
            raise InputError(f"Model {model.name!r}.{method}: expected no other thread inside this model's fit, "
                             f"evaluate or predict, received a call while its {held[1]} runs in thread "
                             f"{held[0].name!r}; wait for that call to return (join its thread), or give each "
                             f"thread a model of its own")
        model._running = (me, method, 1) if held is None else (me, held[1], held[2] + 1)
    try:
        yield
    finally:
        with _lock:
            thread, first, depth = model._running
            model._running = None if depth == 1 else (thread, first, depth - 1)
