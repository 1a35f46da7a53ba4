"""Storm's error-report throttle: a task reports at most `topology.max.error.report.per.interval`
errors per `topology.error.throttle.interval.secs` to the cluster state; the rest are counted and
dropped, so a component failing on every tuple cannot flood ZooKeeper (each report is several
writes). Pure: the caller passes the time."""

from __future__ import annotations

import threading
from typing import Hashable


class ErrorThrottle:
    def __init__(self, interval_secs: float, max_per_interval: int):
        self.interval_secs = float(interval_secs)
        self.max_per_interval = int(max_per_interval)
        self._windows: dict[Hashable, tuple[float, int]] = {}  # key -> (window start, reports in it)
        self._lock = threading.Lock()  # executor threads of one worker share it
        self.dropped = 0

    def allow(self, key: Hashable, now: float) -> bool:
        with self._lock:
            start, count = self._windows.get(key, (now, 0))
            if now - start >= self.interval_secs:
                start, count = now, 0
            if count >= self.max_per_interval:
                self.dropped += 1
                return False
            self._windows[key] = (start, count + 1)
            return True
