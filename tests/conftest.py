"""Shared test setup.

The suite runs against the backend named by ``$FLOWLAYERS_BACKEND`` (default ``tensorflow``), so the next
engine runs the same suite.  Where a test runs is said by its markers (registered in ``pyproject.toml``), and
skipped here where it cannot run (``pytest_collection_modifyitems``):

- ``tensorflow_backend`` / ``jax_backend``: about that backend itself (its devices, its traced graphs, its
  compilation cache): runs only when it is the backend under test;
- ``needs_tensorflow``: uses TensorFlow beside the backend under test (tf.data, TensorFlow's own results): runs
  wherever TensorFlow is installed;
- ``slow``: starts processes or takes more than a few seconds; ``-m "not slow"`` is the quick loop.

A marker acts once the file is imported, so a file that imports TensorFlow (or ``flowlayers_tensorflow``) at
module level guards that import with ``pytest.importorskip("tensorflow")``: where TensorFlow is not installed the
file is skipped as a whole instead of failing to import.

Set before anything starts an engine: 4 logical CPU devices per test process (a 4-device process serves 1-, 2-
and 4-device runtimes) and a quiet TF log.
"""
import importlib.util
import os
import sys
from pathlib import Path

os.environ["FLOWLAYERS_CPU_DEVICES"] = "4"
if os.environ.get("FLOWLAYERS_BACKEND") == "jax":
    # XLA:CPU's LLVM optimisations off: the suite compiles hundreds of small steps and times none, and a third of
    # its time went to optimising code run a few times (float semantics are the same: XLA uses no fast math)
    os.environ.setdefault("XLA_FLAGS", "--xla_backend_optimization_level=0")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import pytest  # noqa: E402

import flowlayers as flow  # noqa: E402
import places  # noqa: E402

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


BACKEND_MARKERS = {"tensorflow_backend": "tensorflow", "jax_backend": "jax"}


def pytest_collection_modifyitems(config, items):
    """Skip, saying why, the tests whose markers (see above) this backend or this machine cannot run."""
    for item in items:
        for marker, backend in BACKEND_MARKERS.items():
            if backend != BACKEND and item.get_closest_marker(marker):
                item.add_marker(pytest.mark.skip(reason=f"about the {backend} backend; the backend under test is "
                                                        f"{BACKEND!r} ($FLOWLAYERS_BACKEND)"))
        if not HAS_TENSORFLOW and item.get_closest_marker("needs_tensorflow"):
            item.add_marker(pytest.mark.skip(reason="needs TensorFlow, which is not installed"))


REPO = Path(__file__).resolve().parents[1]
SHARED_DATA = REPO.parent / "shared" / "data"
MNIST_TEST_FILES = ("t10k-images-idx3-ubyte.gz", "t10k-labels-idx1-ubyte.gz")


@pytest.fixture(autouse=True)
def _reset_config():
    """Each test starts with no automatic layer names, no view set, no device count set (one device), no layout
    rules, the default mesh, seed 0, the default dtype policy (float32) and TensorFlow's global seed unset."""
    reset_tensorflow_seed()
    flow.clear_session()
    flow.mixed_precision.set_global_policy(None)
    flow.settings.set_device_num(None)      # a count set by an earlier test (4 devices) would otherwise hold here
    flow.settings.set_view(None)            # a view set by an earlier test would otherwise hold here
    flow.config.set_layout_rules({})
    flow.config.set_mesh()
    flow.config.set_seed(0)
    yield
    flow.mixed_precision.set_global_policy(None)


def reset_tensorflow_seed():
    """TensorFlow's process-wide seed unset, as a fresh process has it.  Keras' ``set_random_seed`` sets it
    (``tf.random.set_seed``), and it changes the order of every seeded ``tf.data`` shuffle made after: a test
    comparing a program run in its own process with the same program run here would see other batches."""
    tf = sys.modules.get("tensorflow")      # never imported: nothing has set it
    if tf is not None and tf.compat.v1.get_seed(None)[0] is not None:
        tf.random.set_seed(None)


@pytest.fixture
def fresh():
    flow.clear_session()
    yield
    flow.clear_session()


@pytest.fixture
def one_device(fresh):
    """One device in the mirrored view, in a fresh session: where the reference harness's tests run
    (``pytestmark = pytest.mark.usefixtures("one_device")``)."""
    places.use("mirrored", 1)


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
