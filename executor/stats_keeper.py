"""A worker's stats bookkeeping: each executor's rolling windows, and the all-time totals its
executors had in an earlier worker (a restart does not reset them, unlike Storm: STORM-1057).

Executors only add to cumulative counters (`counters()`, cheap on the per-tuple path); the
keeper turns them into ExecutorStats records when the worker heartbeats. Pure apart from the
clock it is given.
"""

from __future__ import annotations

import logging
import threading
from typing import Callable, Iterable, Mapping, Protocol

from executor.stats import add_counters
from executor.stats_record import ExecutorStats, decode_records
from executor.stats_windows import ALL_TIME, WindowedCounters

log = logging.getLogger(__name__)

Executor = tuple[int, int]


class StatsSource(Protocol):
    """What the keeper reads from an executor (executor/base.py)."""

    executor_id: Executor
    component_id: str
    kind: str

    def counters(self) -> dict[str, float]: ...

    def gauges(self) -> dict: ...


class StatsKeeper:
    def __init__(self, clock: Callable[[], float], carried: Mapping[Executor, Mapping[str, float]] | None = None):
        self._clock = clock
        self._started = clock()
        self._windows: dict[Executor, WindowedCounters] = {}
        self._carried = {tuple(k): dict(v) for k, v in (carried or {}).items()}
        # The heartbeat thread and readers (LocalCluster, tests) both make records.
        self._lock = threading.Lock()

    def carry(self, carried: Mapping[Executor, Mapping[str, float]]) -> None:
        """All-time totals from an earlier worker, for executors that have none carried yet."""
        for ex, counters in carried.items():
            self._carried.setdefault(tuple(ex), dict(counters))

    def records(self, sources: Iterable[StatsSource]) -> dict[Executor, ExecutorStats]:
        with self._lock:
            return self._records(sources)

    def _records(self, sources: Iterable[StatsSource]) -> dict[Executor, ExecutorStats]:
        now = self._clock()
        out = {}
        for src in sources:
            ex = tuple(src.executor_id)
            counters = src.counters()
            wc = self._windows.get(ex)
            if wc is None:
                wc = self._windows[ex] = WindowedCounters(self._started)
            wc.observe(now, counters)
            windows = wc.windows(now, counters)
            carried = self._carried.get(ex)
            if carried:
                secs, counts = windows[ALL_TIME]
                windows[ALL_TIME] = (secs, add_counters((carried, counts)))
            g = src.gauges()
            out[ex] = ExecutorStats(src.component_id, src.kind, int(now - self._started), windows,
                                    int(g.get("queue_population", 0)), int(g.get("queue_capacity", 0)),
                                    bool(g.get("backpressure", False)), int(g.get("pending", 0)),
                                    bool(g.get("active", True)), dict(g.get("extra") or {}))
        return out


def carried_from_heartbeats(beats: Iterable[tuple[int, Mapping[Executor, object]]],
                            executors: Iterable[Executor]) -> dict[Executor, dict[str, float]]:
    """The all-time counters of each of `executors` in the newest earlier heartbeat that has it.

    beats: (heartbeat time, {executor: wire stats}). An unreadable record is skipped with a
    warning (its executor then starts from zero)."""
    wanted = {tuple(e) for e in executors}
    newest: dict[Executor, tuple[int, dict[str, float]]] = {}
    for time_secs, stats in beats:
        newer = {tuple(ex): wire for ex, wire in stats.items()
                 if tuple(ex) in wanted and not (tuple(ex) in newest and newest[tuple(ex)][0] >= time_secs)}
        for ex, rec in decode_records("earlier heartbeat (all-time totals restart at 0)", newer).items():
            newest[ex] = (time_secs, dict(rec.window(ALL_TIME)[1]))
    return {ex: counters for ex, (_t, counters) in newest.items()}
