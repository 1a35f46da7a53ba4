"""Bounded multi-producer single-consumer queue of tuple batches.

Producers hand over whole batches (lists of (task_id, payload)) under a lock, so the lock is
paid once per batch, not per tuple. The bound is in entries: a publish that would exceed it
is refused (the producer keeps the batch in its pendingEmits and applies back-pressure).
The consumer may wait for input; producers wake it only when it is actually waiting.
"""

from __future__ import annotations

import threading
import time
from collections import deque


class ReceiveQueue:
    __slots__ = ("name", "capacity", "_lock", "_batches", "_size", "_event", "_waiting")

    def __init__(self, capacity: int, name: str = ""):
        if capacity < 1:
            raise ValueError(f"queue {name!r}: capacity must be >= 1")
        self.name = name
        self.capacity = capacity
        self._lock = threading.Lock()
        self._batches: deque = deque()
        self._size = 0
        self._event = threading.Event()
        self._waiting = False

    def try_publish(self, batch: list) -> bool:
        """Enqueue a batch unless the queue is full; an empty queue accepts any batch."""
        n = len(batch)
        with self._lock:
            size = self._size
            if size and size + n > self.capacity:
                return False
            self._batches.append(batch)
            self._size = size + n
        if self._waiting:
            self._event.set()
        return True

    def publish_force(self, batch: list) -> None:
        """Enqueue regardless of the bound: only for small system traffic (ticks)."""
        with self._lock:
            self._batches.append(batch)
            self._size += len(batch)
        if self._waiting:
            self._event.set()

    def consume(self, max_entries: int = 1 << 30) -> list:
        """Take whole batches, at least one and up to about max_entries entries."""
        if not self._size:
            return []
        out = []
        with self._lock:
            batches = self._batches
            taken = 0
            while batches and taken < max_entries:
                b = batches.popleft()
                taken += len(b)
                out.append(b)
            self._size -= taken
        return out

    def wait(self, timeout: float) -> None:
        """Sleep up to timeout, returning early once something is published."""
        if timeout <= 0:
            time.sleep(0)  # just let other threads run
            return
        self._event.clear()
        self._waiting = True
        try:
            if not self._size:
                self._event.wait(timeout)
        finally:
            self._waiting = False

    def wake(self) -> None:
        self._event.set()

    def __len__(self) -> int:
        return self._size

    def is_full(self) -> bool:
        return self._size >= self.capacity
