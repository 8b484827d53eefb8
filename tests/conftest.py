"""Shared test setup.

The suite runs against the backend named by ``$FLOWLAYERS_BACKEND`` (default ``tensorflow``), so the next
engine runs the same suite.  Test files about the TensorFlow backend itself (they import
``flowlayers_tensorflow`` at module level) run only under it, and single tests about it skip themselves; files
that import TensorFlow at module level (for tf.data) run wherever TensorFlow is installed.

Set before anything starts an engine: 4 logical CPU devices per test process (a 4-device process serves 1-, 2-
and 4-device runtimes) and a quiet TF log.
"""
import importlib.util
import os
import re
from pathlib import Path

os.environ["FLOWLAYERS_CPU_DEVICES"] = "4"
if os.environ.get("FLOWLAYERS_BACKEND") == "jax":
    # XLA:CPU's LLVM optimisations off: the suite compiles hundreds of small steps and times none, and a third of
    # its time went to optimising code run a few times (float semantics are the same: XLA uses no fast math)
    os.environ.setdefault("XLA_FLAGS", "--xla_backend_optimization_level=0")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import pytest  # noqa: E402

import flowlayers as flow  # noqa: E402

BACKEND = flow.config.backend_name()
HAS_TENSORFLOW = importlib.util.find_spec("tensorflow") is not None

if BACKEND == "tensorflow":
    from flowlayers_tensorflow import devices  # noqa: E402

    # Start TF with its logical devices now: a test that touches TF first (a reference computed with tf ops)
    # would otherwise leave this process with one CPU device for every later test.
    devices.devices(1)
else:
    flow.engine.backend().check_device_count(4, f"tests on backend {BACKEND!r}")
    if HAS_TENSORFLOW and "tensorflow" in flow.engine.available():
        # tests comparing the engines, or using tf.data, start TensorFlow too: with its 4 devices, not 1
        flow.engine.backend("tensorflow").check_device_count(4, "tests beside the tensorflow backend")


def pytest_ignore_collect(collection_path, config):
    """Skip the files another backend (or a machine without TensorFlow) cannot run."""
    if collection_path.suffix != ".py" or not collection_path.is_file():
        return None
    text = collection_path.read_text()     # module-level imports only: a test may import inside itself and skip
    if BACKEND != "tensorflow" and re.search(r"^(import|from) flowlayers_tensorflow", text, re.M):
        return True
    if not HAS_TENSORFLOW and re.search(r"^(import tensorflow|from tensorflow)", text, re.M):
        return True
    return None

REPO = Path(__file__).resolve().parents[1]
SHARED_DATA = REPO.parent / "shared" / "data"
MNIST_TEST_FILES = ("t10k-images-idx3-ubyte.gz", "t10k-labels-idx1-ubyte.gz")


@pytest.fixture(autouse=True)
def _reset_config():
    """Each test starts with no automatic layer names, no view set, no device count set (one device), no layout
    rules, the default mesh, seed 0 and the default dtype policy (float32)."""
    flow.clear_session()
    flow.mixed_precision.set_global_policy(None)
    flow.settings.set_device_num(None)      # a count set by an earlier test (4 devices) would otherwise hold here
    flow.settings.set_view(None)            # a view set by an earlier test would otherwise hold here
    flow.config.set_layout_rules({})
    flow.config.set_mesh()
    flow.config.set_seed(0)
    yield
    flow.mixed_precision.set_global_policy(None)


@pytest.fixture
def fresh():
    flow.clear_session()
    yield
    flow.clear_session()


@pytest.fixture(scope="session")
def shared_data():
    """``<repo>/../shared/data`` with the MNIST test set (idx, gz).  Without it the test is skipped on a
    developer's machine, and fails in CI (``$CI`` set), where the files are always laid out."""
    missing = [name for name in MNIST_TEST_FILES if not (SHARED_DATA / name).is_file()]
    if missing:
        message = f"MNIST test set: {', '.join(missing)} not found in {SHARED_DATA}"
        if os.environ.get("CI", "").lower() not in ("", "0", "false"):
            pytest.fail(f"{message}; CI must have it (../shared/data beside the clone)", pytrace=False)
        pytest.skip(message)
    return SHARED_DATA
