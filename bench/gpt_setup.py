"""Tutorial 07's GPT as the benches run it: the model's module, its size arguments, a batch of random characters
and a timed training step."""
import importlib.util
import os
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
_SPEC = importlib.util.spec_from_file_location("char_gpt", os.path.join(HERE, "..", "tutorials", "07_char_gpt.py"))
char_gpt = importlib.util.module_from_spec(_SPEC)
_SPEC.loader.exec_module(char_gpt)


def add_size_arguments(parser, width=128, heads=4, blocks=4, seq=64, vocab=96, batch=16, steps=8):
    """The GPT's size and the timing's length, as command-line options with these defaults."""
    for flag, default in (("width", width), ("heads", heads), ("blocks", blocks), ("seq", seq), ("vocab", vocab),
                          ("batch", batch), ("steps", steps)):
        parser.add_argument(f"--{flag}", type=int, default=default)


def batch(args, seed=0):
    """``([ids, positions], next ids)`` for ``args.batch`` random sequences."""
    ids = np.random.default_rng(seed).integers(0, args.vocab, (args.batch, args.seq)).astype(np.int32)
    return [ids, np.broadcast_to(np.arange(args.seq, dtype=np.int32), ids.shape)], np.roll(ids, -1, axis=1)


def timed_steps(model, feeds, labels, steps, warm_up=2):
    """(median seconds of ``steps`` training steps after ``warm_up`` ones, every step's loss)."""
    losses, times = [float(model.train_on_batch(feeds, labels)) for _ in range(warm_up)], []
    for _ in range(steps):
        start = time.perf_counter()
        losses.append(float(model.train_on_batch(feeds, labels)))
        times.append(time.perf_counter() - start)
    return float(np.median(times)), losses
