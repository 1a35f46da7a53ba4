import pytest
from testutil import assert_threads_gone

_OURS = ("executor-", "worker-", "ticks-", "stop-")


@pytest.fixture(autouse=True)
def no_leaked_threads():
    """Every LocalCluster thread must be gone after each test."""
    yield
    assert_threads_gone(_OURS)
