"""Tick tuples: one thread per worker publishing them into executor queues on schedule."""

from __future__ import annotations

import heapq
import threading
import time

from executor.errors import InvalidTopologyError
from executor.receive_queue import ReceiveQueue
from executor.tuple import make_tick


class TickTimer:
    """One thread delivering tick tuples to executor queues on schedule."""

    def __init__(self, name: str):
        self._name = name
        self._entries: list[tuple[float, int, float, ReceiveQueue, list]] = []
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def add(self, interval: float, queue: ReceiveQueue, tasks: list[int]) -> None:
        if interval <= 0:
            raise InvalidTopologyError(f"tick interval must be positive, got {interval}")
        tick = make_tick(interval)
        heapq.heappush(self._entries, (time.monotonic() + interval, len(self._entries), interval, queue,
                                       [(t, tick) for t in tasks]))

    def start(self) -> None:
        if self._thread is None and self._entries:
            self._thread = threading.Thread(target=self._run, name=f"ticks-{self._name}", daemon=True)
            self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None and self._thread.ident is not None:
            self._thread.join(5)

    def _run(self) -> None:
        entries = self._entries
        while not self._stop.is_set():
            due, seq, interval, queue, batch = entries[0]
            delay = due - time.monotonic()
            if delay > 0:
                self._stop.wait(min(delay, 0.5))
                continue
            queue.publish_force(list(batch))
            heapq.heapreplace(entries, (due + interval, seq, interval, queue, batch))
