"""A launched job's output reads like one job's: ``fit``'s progress on process 0 only, one line saying what
started the job, and none of the engines' start-up chatter (absl's lines, Gloo's "Rank i is connected" on the
jax backend); ``--verbose`` shows all of it.  On the backend under test."""
import subprocess
import sys
import textwrap

import pytest

from test_processes import environment

pytestmark = pytest.mark.slow

SCRIPT = """
    import numpy as np
    import flowlayers as flow

    flow.config.gpu_device_num(1)
    x = np.random.default_rng(0).normal(size=(32, 4)).astype("float32")
    y = (x[:, 0] > 0).astype("int32")
    model = flow.Sequential([flow.layers.Dense(2, input_shape=(4,))])
    model.compile(flow.optimizers.SGD(0.1), flow.losses.SparseCategoricalCrossentropy(from_logits=True))
    model.fit(x, y, batch_size=8, epochs=2, verbose=2)
    print("finished", flush=True)
"""


def launched(tmp_path, *flags):
    path = tmp_path / "fit.py"
    path.write_text(textwrap.dedent(SCRIPT))
    r = subprocess.run([sys.executable, "-m", "flowlayers.launch", "--processes", "2", "--devices-per-process", "1",
                        *flags, str(path)], capture_output=True, text=True, timeout=300, env=environment(1))
    assert r.returncode == 0, (r.stdout + r.stderr)[-3000:]
    return r.stdout


def test_the_progress_is_process_0s_and_the_engines_keep_quiet(tmp_path):
    out = launched(tmp_path)
    assert out.count("[process 0] Epoch ") == 2 and "[process 1] Epoch" not in out
    assert [line for line in out.splitlines() if line.startswith("[process 1] ")] == ["[process 1] finished"]
    assert sum(line.startswith("[process 0] flowlayers: python -m flowlayers.launch") for line in out.splitlines()) == 1
    for chatter in ("[Gloo]", "peer ranks", "absl::InitializeLog", "oneDNN"):
        assert chatter not in out, out


def test_verbose_shows_every_process_and_the_engines(tmp_path):
    out = launched(tmp_path, "--verbose")
    assert out.count("[process 0] Epoch ") == 2 and out.count("[process 1] Epoch ") == 2
    assert "absl::InitializeLog" in out or "[Gloo]" in out or "oneDNN" in out, out
