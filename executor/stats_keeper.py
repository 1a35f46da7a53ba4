"""A worker's stats bookkeeping: each executor's rolling windows, and what its executors had
counted in an earlier worker (a restart does not reset them, unlike Storm: STORM-1057): all of
its all-time totals, and of each window the share still inside it, so that the windows and all
time agree (a 10-minute window of a younger topology holds all of it).

Executors only add to cumulative counters (`counters()`, cheap on the per-tuple path); the
keeper turns them into ExecutorStats records when the worker heartbeats. Pure apart from the
clock it is given.
"""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass
from typing import Callable, Iterable, Mapping, Protocol

from executor.stats import add_counters
from executor.stats_record import ExecutorStats, decode_records
from executor.stats_windows import ALL_TIME, WindowedCounters

log = logging.getLogger(__name__)

Executor = tuple[int, int]
Windows = Mapping[str, tuple[float, Mapping[str, float]]]


@dataclass(frozen=True)
class Carried:
    """What an executor's earlier worker last reported: when (wall-clock seconds) and its windows
    (name -> (seconds covered, counters), all time included)."""

    time_secs: float
    windows: Windows


def with_carried(own: Windows, carried: Windows, age: float) -> dict[str, tuple[float, dict[str, float]]]:
    """An executor's own windows (counted since its worker started) plus what its earlier worker
    reported `age` seconds ago (pure): all of its all-time totals, and of each window the share
    of its counts still inside the window now, taking them as spread evenly over the seconds
    that window covered then (all of them while the topology is younger than the window). A
    window's seconds then reach back to the oldest of what it holds, so rates stay true."""
    out: dict[str, tuple[float, dict[str, float]]] = {}
    for name, (secs, counters) in own.items():
        c_secs, c_counters = carried.get(name, (0.0, {}))
        if name == ALL_TIME:
            share = 1.0
            reach = age + c_secs
        else:
            width = float(name)
            if age >= width:
                share, reach = 0.0, 0.0
            elif c_secs <= 0:
                share, reach = 1.0, age
            else:
                inside = min(c_secs, width - age)  # the seconds of the carried span still in the window
                share, reach = inside / c_secs, age + inside
        if share <= 0 or not c_counters:
            out[name] = (secs, dict(counters))
            continue
        part = c_counters if share >= 1 else {k: round(v * share, 3) for k, v in c_counters.items()}
        out[name] = (max(secs, reach), add_counters((part, counters)))
    return out


class StatsSource(Protocol):
    """What the keeper reads from an executor (executor/base.py)."""

    executor_id: Executor
    component_id: str
    kind: str

    def counters(self) -> dict[str, float]: ...

    def gauges(self) -> dict: ...


class StatsKeeper:
    def __init__(self, clock: Callable[[], float]):
        self._clock = clock
        self._started = clock()
        self._windows: dict[Executor, WindowedCounters] = {}
        # executor -> (when on this keeper's clock it was reported, its windows then)
        self._carried: dict[Executor, tuple[float, Windows]] = {}
        # The heartbeat thread and readers (LocalCluster, tests) both make records.
        self._lock = threading.Lock()

    def carry(self, carried: Mapping[Executor, Carried], wall_now: float) -> None:
        """What an earlier worker reported (`wall_now`: the wall clock now, to age it), for
        executors that have nothing carried yet."""
        now = self._clock()
        with self._lock:
            for ex, c in carried.items():
                self._carried.setdefault(tuple(ex), (now - max(0.0, wall_now - c.time_secs), c.windows))

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
            if carried is not None:
                windows = with_carried(windows, carried[1], now - carried[0])
            g = src.gauges()
            out[ex] = ExecutorStats(src.component_id, src.kind, int(now - self._started), windows,
                                    int(g.get("queue_population", 0)), int(g.get("queue_capacity", 0)),
                                    bool(g.get("backpressure", False)), int(g.get("pending", 0)),
                                    bool(g.get("active", True)), dict(g.get("extra") or {}))
        return out


def carried_from_heartbeats(beats: Iterable[tuple[int, Mapping[Executor, object]]],
                            executors: Iterable[Executor]) -> dict[Executor, Carried]:
    """What each of `executors` last reported: its windows in the newest earlier heartbeat that has it.

    beats: (heartbeat time, {executor: wire stats}). An unreadable record is skipped with a
    warning (its executor then starts from zero)."""
    wanted = {tuple(e) for e in executors}
    newest: dict[Executor, Carried] = {}
    for time_secs, stats in beats:
        newer = {tuple(ex): wire for ex, wire in stats.items()
                 if tuple(ex) in wanted and not (tuple(ex) in newest and newest[tuple(ex)].time_secs >= time_secs)}
        for ex, rec in decode_records("earlier heartbeat (its stats restart at 0)", newer).items():
            newest[ex] = Carried(time_secs, {name: (secs, dict(c)) for name, (secs, c) in rec.windows.items()})
    return newest
