"""The progress bar of ``fit``, ``evaluate`` and ``predict`` is Keras 3's: driven through the same hooks on the
same clock, ``flow.callbacks.ProgbarLogger`` writes what ``keras.callbacks.ProgbarLogger`` writes, character for
character (the ETA while running, the time taken and ``ms/step`` at the end, ``verbose=2``'s one line per
epoch, an unknown length); and the loops print it as Keras decides (``verbose="auto"`` is 1 in all three)."""
import contextlib
import io
import re
import time

import numpy as np
import pytest
from keras.src.callbacks.progbar_logger import ProgbarLogger as KerasProgbarLogger

import flowlayers as flow
from flowlayers.callbacks import ProgbarLogger

tf = pytest.importorskip("tensorflow")     # used beside the backend under test: without it the file is skipped
pytestmark = pytest.mark.needs_tensorflow

COLOUR = re.compile(r"\x1b\[[0-9;]*m")


class Terminal(io.StringIO):
    def isatty(self):
        return True


def drive(logger, clock, hooks, capture_stdout):
    """Run ``hooks`` (``(seconds later, hook, args...)``) on ``logger`` with ``time.time`` at ``clock``; return
    what it wrote."""
    out = io.StringIO()
    with contextlib.redirect_stdout(out) if capture_stdout else contextlib.nullcontext():
        for later, hook, *args in hooks:
            clock[0] += later
            getattr(logger, hook)(*args)
    return out.getvalue()


def both(monkeypatch, params, hooks):
    """What Keras' logger and ours (on a terminal) write for the same hooks at the same times."""
    clock = [1000.0]
    monkeypatch.setattr(time, "time", lambda: clock[0])
    keras_logger, ours, terminal = KerasProgbarLogger(), ProgbarLogger(stream=Terminal()), None
    keras_logger.set_params(params)
    ours.set_params(params)
    want = drive(keras_logger, clock, hooks, capture_stdout=True)
    clock[0] = 1000.0
    terminal = ours.stream
    drive(ours, clock, hooks, capture_stdout=False)
    return want, terminal.getvalue()


def epochs(n, steps, seconds, logs, batches=None):
    """The hooks of a fit of ``n`` epochs of ``steps`` batches each ``seconds`` long (the first three times that)."""
    hooks = [(0, "on_train_begin")]
    for e in range(n):
        hooks.append((0, "on_epoch_begin", e))
        for b in range(batches or steps):
            hooks.append((seconds * (3 if b == 0 else 1), "on_train_batch_end", b, logs(e, b)))
        hooks.append((0.001, "on_epoch_end", e, logs(e, (batches or steps) - 1)))
    return hooks + [(0, "on_train_end")]


def metric_logs(e, b):
    return {"accuracy": 0.5 + 0.01 * b, "loss": 1.0 / (1 + e + b), "tiny": 1e-5 * (b + 1)}


@pytest.mark.parametrize("verbose", [1, 2, "auto"])
@pytest.mark.parametrize("seconds", [0.004, 0.06, 2.5, 700.0])     # us/ms/s per step; ETAs of seconds to hours
def test_fit_draws_what_keras_draws(monkeypatch, verbose, seconds):
    want, got = both(monkeypatch, {"verbose": verbose, "epochs": 2, "steps": 12},
                     epochs(2, 12, seconds, metric_logs))
    assert got == want
    assert ("/step" in got) and (verbose == 2 or "━" in got)


def test_an_epoch_of_unknown_length_and_evaluate_and_predict_draw_what_keras_draws(monkeypatch):
    want, got = both(monkeypatch, {"verbose": 1, "epochs": 1, "steps": None}, epochs(1, None, 0.02, metric_logs, 5))
    assert got == want and "5/5" in got and "/Unknown" in got
    hooks = [(0, "on_test_begin")] + [(0.03, "on_test_batch_end", b, {"loss": 0.2}) for b in range(4)] + \
        [(0, "on_test_end", {"loss": 0.2}), (0, "on_predict_begin")] + \
        [(0.01, "on_predict_batch_end", b, {"outputs": None}) for b in range(3)] + [(0, "on_predict_end", {})]
    want, got = both(monkeypatch, {"verbose": "auto", "epochs": 1, "steps": 4}, hooks)
    assert got == want


def test_without_a_terminal_the_bar_has_no_colour_codes_and_thin_cells_to_go(monkeypatch):
    want, _ = both(monkeypatch, {"verbose": 1, "epochs": 1, "steps": 4}, epochs(1, 4, 0.1, metric_logs))
    clock = [1000.0]
    monkeypatch.setattr(time, "time", lambda: clock[0])
    plain = ProgbarLogger(stream=io.StringIO())
    plain.set_params({"verbose": 1, "epochs": 1, "steps": 4})
    drive(plain, clock, epochs(1, 4, 0.1, metric_logs), capture_stdout=False)
    got = plain.stream.getvalue()
    assert "\x1b" not in got
    # Keras' cells to go differ by colour alone: here they are thin
    assert got == re.sub(r"\x1b\[37m(━*)\x1b\[0m", lambda m: "─" * len(m.group(1)), want).replace(
        "\x1b[32m", "").replace("\x1b[1m", "").replace("\x1b[0m", "")


def model():
    x = flow.Input((3,))
    m = flow.Model(x, flow.layers.Dense(1)(x))
    m.compile("sgd", "mse", metrics=["mae"])
    return m


X, Y = np.ones((16, 3), np.float32), np.zeros((16, 1), np.float32)
FINAL = re.compile(r"(\d+)/(\d+) ━+ \d+s \d+(us|ms|s)/step - loss: \d\.\d{4}(e-\d\d)? - mae: \d\.\d{4}(e-\d\d)?")


def redraws(text):
    """The states a bar went through: each redraw (after ``\\r``) up to the next, padding stripped."""
    return [part.rstrip("\b \n") for part in re.split(r"\r", text) if part.strip("\b \n")]


def test_fit_evaluate_and_predict_print_keras_bars_by_default(capsys):
    m = model()
    m.fit(X, Y, batch_size=4, epochs=2)
    out = capsys.readouterr().out
    assert out.startswith("Epoch 1/2\n") and "\nEpoch 2/2\n" in out
    first = redraws(out.split("Epoch 2/2\n")[0][len("Epoch 1/2\n"):])
    assert first[0].startswith("1/4 ━━━━━─")            # 1/4 of 20 cells done, the rest to go
    assert FINAL.fullmatch(first[-1]) and first[-1].startswith("4/4 " + "━" * 20)
    assert out.endswith("\n") and out.count("\n") == 4   # two headers, two finished bars
    assert m.evaluate(X, Y) == pytest.approx(m.evaluate(X, Y, verbose=0))
    evaluated = capsys.readouterr().out
    assert FINAL.fullmatch(redraws(evaluated)[-1]) and redraws(evaluated)[-1].startswith("1/1 ")
    m.predict(X, batch_size=8)
    predicted = redraws(capsys.readouterr().out)
    assert re.fullmatch(r"2/2 ━{20} \d+s \d+(us|ms|s)/step", predicted[-1])
    m.fit(X, Y, batch_size=4, epochs=1, verbose=0)
    m.predict(X, verbose=0)
    assert capsys.readouterr().out == ""


def test_verbose_2_prints_one_line_per_epoch(capsys):
    model().fit(X, Y, batch_size=4, epochs=3, verbose=2, validation_split=0.25)
    lines = capsys.readouterr().out.splitlines()
    assert lines[0::2] == ["Epoch 1/3", "Epoch 2/3", "Epoch 3/3"]
    for line in lines[1::2]:
        assert re.fullmatch(r"3/3 - \d+s - \d+(us|ms|s)/step - loss: \S+ - mae: \S+ - val_loss: \S+ - val_mae: \S+",
                            line), line


def test_a_dataset_of_unknown_length_ends_at_the_batches_it_had(capsys):
    data = tf.data.Dataset.from_tensor_slices((np.ones((12, 3), np.float32), np.zeros((12, 1), np.float32)))
    data = data.filter(lambda x, y: True).batch(4)           # filter: the length is unknown until the end
    assert data.cardinality().numpy() == tf.data.UNKNOWN_CARDINALITY
    model().fit(data, epochs=1)
    states = redraws(capsys.readouterr().out)
    assert states[0].startswith("      1/Unknown ")
    assert FINAL.fullmatch(states[-1]) and states[-1].startswith("3/3 " + "━" * 20)
