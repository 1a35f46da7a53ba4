import threading
import time

import pytest

_OURS = ("executor-", "worker-", "ticks-", "stop-")


@pytest.fixture(autouse=True)
def no_leaked_threads():
    """Every LocalCluster thread must be gone after each test."""
    yield
    deadline = time.monotonic() + 10
    while True:
        left = [t.name for t in threading.enumerate() if t.name.startswith(_OURS)]
        if not left:
            return
        if time.monotonic() > deadline:
            raise AssertionError(f"threads left behind: {left}")
        time.sleep(0.02)
