"""Event time's watermarks (Storm's WaterMarkEventGenerator), pure: the watermark is the oldest
of the newest timestamps across every input stream of the bolt, minus the lag; a stream that
has sent nothing yet holds it back. A tuple older than the last watermark is late."""

from __future__ import annotations

from typing import Hashable, Iterable


class WatermarkGenerator:
    def __init__(self, streams: Iterable[Hashable], lag_ms: float = 0.0):
        self.streams = frozenset(streams)
        self.lag_ms = lag_ms
        self._newest: dict[Hashable, float] = {}
        self.last: float | None = None

    def track(self, stream: Hashable, ts: float) -> bool:
        """Note a tuple's timestamp; False when it is late (before the last watermark)."""
        newest = self._newest.get(stream)
        if newest is None or ts > newest:
            self._newest[stream] = ts
        return self.last is None or ts >= self.last

    def advance(self) -> float | None:
        """The new watermark, or None when it did not move."""
        if not self.streams or any(s not in self._newest for s in self.streams):
            return None
        wm = min(self._newest[s] for s in self.streams) - self.lag_ms
        if self.last is not None and wm <= self.last:
            return None
        self.last = wm
        return wm
