import os

os.environ["FLOWLAYERS_CPU_DEVICES"] = "4"
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import pytest  # noqa: E402

import flowlayers as flow  # noqa: E402


@pytest.fixture
def fresh():
    flow.clear_session()
    yield
    flow.clear_session()
