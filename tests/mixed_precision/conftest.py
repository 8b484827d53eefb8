"""Each test of mixed precision starts and ends under the default policy (float32)."""
import pytest

import flowlayers as flow


@pytest.fixture(autouse=True)
def _default_policy():
    flow.mixed_precision.set_global_policy(None)
    yield
    flow.mixed_precision.set_global_policy(None)
