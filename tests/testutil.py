"""Polling helper shared by every test directory (tests/ is on sys.path via tests/conftest.py)."""

from __future__ import annotations

import threading
import time
from typing import Any, Callable


def wait_until(predicate: Callable[[], Any], timeout: float = 10.0, message: Any = "condition",
               interval: float = 0.01) -> Any:
    """Poll `predicate` until it returns something truthy (returned) or fail after `timeout`."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            text = message() if callable(message) else message
            raise AssertionError(f"timed out after {timeout:g}s waiting for {text}")
        time.sleep(interval)  # poll interval, bounded by the deadline above


def assert_threads_gone(prefixes: tuple[str, ...], timeout: float = 10.0) -> None:
    """Wait until no thread whose name starts with one of `prefixes` is alive."""
    left: list[str] = []

    def gone() -> bool:
        left[:] = [t.name for t in threading.enumerate() if t.name.startswith(prefixes)]
        return not left

    wait_until(gone, timeout=timeout, message=lambda: f"threads to stop; left behind: {left}")
