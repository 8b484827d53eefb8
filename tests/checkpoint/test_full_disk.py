"""A save that runs out of room (issue 37, finding 7: a full disk) is a CheckpointError naming the checkpoint, the
file and the bytes it lacked; the partial save is removed and the previous checkpoint stays as it was.

The disk is not filled: the process's file size limit (RLIMIT_FSIZE, with SIGXFSZ ignored) makes the write of
the first large file fail part-way, as a full disk does, with the bytes written so far on disk.
"""
import contextlib
import re
import resource
import signal

import numpy as np
import pytest

import flowlayers as flow

LIMIT = 20_000      # bytes: the kernel's file needs 32,896 (a 128-byte header and 8 x 1024 float32)


@contextlib.contextmanager
def file_size_limit(limit):
    handler = signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
    resource.setrlimit(resource.RLIMIT_FSIZE, (limit, hard))
    try:
        yield
    finally:
        resource.setrlimit(resource.RLIMIT_FSIZE, (soft, hard))
        signal.signal(signal.SIGXFSZ, handler)


def test_a_save_out_of_room_names_the_file_and_the_bytes_missing_and_keeps_the_previous_checkpoint(tmp_path):
    flow.config.gpu_device_num(1)
    flow.clear_session()
    x = flow.Input((8,))
    model = flow.Model(x, flow.layers.Dense(1024)(x))
    model.save_weights(tmp_path / "ckpt")
    saved = model.get_weights()
    model.set_weights([w + 1 for w in saved])
    with file_size_limit(LIMIT), pytest.raises(flow.CheckpointError) as e:
        model.save_weights(tmp_path / "ckpt")
    ckpt = str(tmp_path / "ckpt")
    assert re.fullmatch(rf"checkpoint {re.escape(repr(ckpt))}: writing {re.escape(str(tmp_path))}/\.ckpt\.tmp-[^/]+"
                        rf"/00000\.npy failed after {LIMIT} of 32896 bytes \({32896 - LIMIT} missing\): File too "
                        rf"large; nothing was replaced \(the previous checkpoint, if any, is as it was\) and the "
                        rf"partial save was removed; free space on that file system, or choose another path, and "
                        rf"save again", str(e.value)), str(e.value)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ckpt"]
    model.load_weights(tmp_path / "ckpt")
    assert all(np.array_equal(a, b) for a, b in zip(model.get_weights(), saved))
    model.save_weights(tmp_path / "ckpt")       # room again: the save goes through
