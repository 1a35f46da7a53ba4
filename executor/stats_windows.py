"""Storm's rolling stats windows over cumulative counters (pure; no clock of its own).

An executor only ever adds to cumulative counters (cheap on the per-tuple path). What a window
shows is the difference between the counters now and the counters as they were about one
window ago. To know "as they were", a `WindowedCounters` keeps, per window, a ring of snapshots
taken at bucket boundaries (Storm's rolling windows use 20 buckets a window, as here): a bucket
is remembered, not every sample, so memory is fixed and a snapshot costs a copy of the counters.

Counters are flat mappings of str -> number: `metric` or `metric|key` (key: a stream, or
`component:stream` for a bolt's input). Latencies are kept as sums and counts (`..._ms_sum`,
`..._count`), so a window's average is a ratio of two differences and merging executors is a
sum (executor/stats.py).
"""

from __future__ import annotations

from collections import deque
from typing import Mapping

# Storm's windows, in the order its UI and REST API list them.
WINDOWS: tuple[int, ...] = (600, 10800, 86400)
ALL_TIME = ":all-time"
WINDOW_NAMES: tuple[str, ...] = tuple(str(w) for w in WINDOWS) + (ALL_TIME,)
BUCKETS = 20

Counters = Mapping[str, float]


def window_pretty(window: str) -> str:
    """How Storm prints a window: "10m 0s", "3h 0m 0s", "1d 0h 0m 0s", "All time"."""
    if window == ALL_TIME:
        return "All time"
    secs = int(window)
    days, rest = divmod(secs, 86400)
    hours, rest = divmod(rest, 3600)
    mins, secs = divmod(rest, 60)
    if days:
        return f"{days}d {hours}h {mins}m {secs}s"
    if hours:
        return f"{hours}h {mins}m {secs}s"
    return f"{mins}m {secs}s"


def parse_window(value: str | None) -> str:
    """A `?window=` parameter as one of WINDOW_NAMES (None: all time); ValueError otherwise."""
    if value is None or value == "":
        return ALL_TIME
    text = str(value).strip()
    if text in WINDOW_NAMES:
        return text
    if text in ("all-time", "alltime", "all"):
        return ALL_TIME
    raise ValueError(f"window {value!r} is not one of {', '.join(WINDOW_NAMES)}")


def subtract(now: Counters, then: Counters) -> dict[str, float]:
    """now - then, key by key (a key missing from then counts from 0; one missing from now was
    never added to since, so it is 0 in the window and left out)."""
    return {k: v - then.get(k, 0) for k, v in now.items() if v != then.get(k, 0)}


class WindowedCounters:
    """Snapshots of one executor's cumulative counters, bucketed per window."""

    __slots__ = ("_start", "_rings", "_last_bucket")

    def __init__(self, start: float):
        self._start = start
        # per window: deque of (bucket start time, counters at that time), oldest first
        self._rings: dict[int, deque] = {w: deque([(start, {})], maxlen=BUCKETS + 1) for w in WINDOWS}
        self._last_bucket: dict[int, int] = dict.fromkeys(WINDOWS, 0)

    def observe(self, now: float, counters: Counters) -> None:
        """Record the counters at `now` where a bucket boundary has passed since the last call."""
        for w in WINDOWS:
            bucket = int((now - self._start) // (w / BUCKETS))
            if bucket > self._last_bucket[w]:
                self._last_bucket[w] = bucket
                self._rings[w].append((now, dict(counters)))

    def windows(self, now: float, counters: Counters) -> dict[str, tuple[float, dict[str, float]]]:
        """Per window name: (seconds the window covers, counters added in it). A window covers
        from the oldest snapshot it still holds (at most a window and a bucket ago; less while
        the executor is younger than the window); all time covers since the start."""
        out: dict[str, tuple[float, dict[str, float]]] = {}
        for w in WINDOWS:
            ring = self._rings[w]
            # The newest snapshot at least a window old, else the oldest kept.
            base_time, base = ring[0]
            for t, snap in ring:
                if now - t >= w:
                    base_time, base = t, snap
                else:
                    break
            out[str(w)] = (max(0.0, now - base_time), subtract(counters, base))
        out[ALL_TIME] = (max(0.0, now - self._start), {k: v for k, v in counters.items() if v})
        return out
