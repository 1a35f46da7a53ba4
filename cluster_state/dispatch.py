"""The event thread of a ClusterState client.

ZooKeeper I/O threads (and writers of the in-memory store) only enqueue here; registered
callbacks run on this one named thread, in order, so a slow or failing callback can never
stall kazoo's connection handling or the writer.
"""

from __future__ import annotations

import logging
import queue
import threading
import uuid
from typing import Any, Callable

from .protocol import EventType, WatchCallback

log = logging.getLogger(__name__)

_STOP = object()


class EventDispatcher:
    """One named thread running submitted calls in submission order."""

    def __init__(self, name: str) -> None:
        self.name = name
        self._queue: queue.SimpleQueue = queue.SimpleQueue()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()
        self._stopped = False

    def start(self) -> None:
        with self._lock:
            if self._thread is not None or self._stopped:
                return
            self._thread = threading.Thread(target=self._run, name=self.name, daemon=True)
            self._thread.start()

    def submit(self, fn: Callable[..., Any], *args: Any) -> None:
        """Never blocks (unbounded queue): safe from kazoo's threads and under locks."""
        if not self._stopped:
            self._queue.put((fn, args))

    def stop(self, timeout: float = 10.0) -> None:
        """Idempotent. Work queued before stop still runs; later submissions are dropped."""
        with self._lock:
            if self._stopped:
                return
            self._stopped = True
            thread = self._thread
        self._queue.put((_STOP, ()))
        # A callback may close its own client: never join the current thread.
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout)
            if thread.is_alive():
                log.warning("event thread %s did not stop within %.1fs", self.name, timeout)

    def _run(self) -> None:
        while True:
            fn, args = self._queue.get()
            if fn is _STOP:
                return
            try:
                fn(*args)
            except Exception:  # a failing callback must not kill the event thread
                log.exception("error in %s running %r", self.name, fn)


class CallbackHub:
    """Registered (event type, path) callbacks; `deliver` runs on the client's EventDispatcher."""

    def __init__(self) -> None:
        self._callbacks: dict[str, WatchCallback] = {}
        self._lock = threading.Lock()

    def register(self, callback: WatchCallback) -> str:
        if not callable(callback):
            raise TypeError(f"callback must be callable, got {callback!r}")
        callback_id = uuid.uuid4().hex
        with self._lock:
            self._callbacks[callback_id] = callback
        return callback_id

    def unregister(self, callback_id: str) -> None:
        with self._lock:
            self._callbacks.pop(callback_id, None)

    def deliver(self, event_type: EventType, path: str) -> None:
        """Run the callbacks now (call on the dispatcher thread)."""
        with self._lock:
            callbacks = list(self._callbacks.values())
        for callback in callbacks:
            try:
                callback(event_type, path)
            except Exception:  # one bad callback must not starve the others
                log.exception("watch callback %r failed for %s %s", callback, event_type.value, path)
