"""Which tuples form which window, and when (Storm's WindowManager with its count, time and
watermark eviction and trigger policies), as a pure object: time is passed in, nothing is read
from a clock, and each call says which windows fired and which items left the window.

Items are kept in timestamp order (processing time: arrival time). At a trigger with reference
time R (the tick's time, the triggering tuple's, or a window end under a watermark), the window
is, of the items with timestamp <= R: those with R - length < ts for a duration window, the
last `length` for a count window. Older items leave (expire); newer ones wait for a later
window. A window with no item is not handed to the bolt (Storm's onTrigger returns false).

- processing time, count slide: every `sliding` items the newest one's time triggers;
- processing time, duration slide: `on_time(now)` every sliding interval (the executor's ticks)
  fires every window ending, on a grid started by the first tick, up to `now`;
- event time, duration slide: `on_watermark(wm)` fires every window ending at a multiple of the
  sliding interval up to the watermark, skipping ahead over spans with no item
  (WatermarkTimeTriggerPolicy);
- event time, count slide: every `sliding`-th item (by timestamp) up to the watermark triggers
  at its timestamp (WatermarkCountTriggerPolicy).
"""

from __future__ import annotations

import bisect
import math
from dataclasses import dataclass, field
from typing import Any

from executor.windowing.spec import WindowSpec

_AFTER = math.inf  # sorts after any sequence number: bisect on (ts, _AFTER) finds "ts <= x" bounds


@dataclass(frozen=True)
class Fired:
    window: list
    new: list
    expired: list
    start: float | None
    end: float


@dataclass
class Step:
    """What one call produced: windows to execute (in order) and items that left (to ack)."""

    fired: list[Fired] = field(default_factory=list)
    expired: list = field(default_factory=list)


class WindowManager:
    def __init__(self, spec: WindowSpec):
        self.spec = spec
        self._events: list[tuple[float, float, Any]] = []   # (ts, seq, item), sorted
        self._seq = 0
        self._prev: set[float] = set()                      # seqs of the last window
        self._expired_since: list = []                       # left since the last window handed out
        self._since_trigger = 0                              # processing time, count slide
        self._next_end = 0.0                                 # event time, duration slide
        self._last_counted = -math.inf                       # event time, count slide
        # seq -> the earliest window end the item may be in: after a split over new tasks, what
        # the item's old task had handed out already (executor/windowing/rescale.py); mostly empty
        self._floors: dict[float, float] = {}

    def __len__(self) -> int:
        return len(self._events)

    def add(self, item: Any, ts: float) -> Step:
        self._seq += 1
        entry = (ts, self._seq, item)
        events = self._events
        if not events or events[-1][:2] <= entry[:2]:
            events.append(entry)
        else:  # out of order (event time)
            bisect.insort(events, entry, key=lambda e: e[:2])
        step = Step()
        if not self.spec.event_time and self.spec.sliding_count is not None:
            self._since_trigger += 1
            if self._since_trigger >= self.spec.sliding_count:
                self._since_trigger = 0
                self._fire(ts, step)
        return step

    def on_time(self, now: float) -> Step:
        """Processing time: a tick (every sliding interval of a duration slide). The first tick's
        time starts a grid of window ends, one sliding interval apart; a tick fires every end up to
        its time, so a late tick (a busy executor) fires the windows it missed instead of letting
        their items expire unseen (a tumbling window's tuples would be acked uncounted)."""
        step = Step()
        sliding = self.spec.sliding_ms
        if not self.spec.event_time and sliding is not None:
            if self._next_end == 0.0:
                # The grid ends at this tick; it starts early enough that the first window covers
                # the oldest item (a first tick later than a window length after it: a busy start).
                back = math.floor((now - self._events[0][0]) / sliding) if self._events else 0
                self._next_end = now - max(0, back) * sliding
            self._fire_due(now, step)
        return step

    def on_watermark(self, wm: float) -> Step:
        """Event time: every tuple at or before `wm` has arrived (or is late)."""
        step = Step()
        spec = self.spec
        if spec.sliding_ms is not None:
            self._fire_due(wm, step)
        else:
            lo = bisect.bisect_right(self._events, (self._last_counted, _AFTER), key=lambda e: e[:2])
            hi = bisect.bisect_right(self._events, (wm, _AFTER), key=lambda e: e[:2])
            stamps = [self._events[i][0] for i in range(lo, hi)][spec.sliding_count - 1::spec.sliding_count]
            for ts in stamps:
                self._fire(ts, step)
                self._last_counted = ts
        return step

    def _fire_due(self, limit: float, step: Step) -> None:
        """Fire every window ending at or before `limit` on the grid of window ends, skipping
        ahead over spans with no item."""
        sliding = self.spec.sliding_ms
        end = self._next_end
        while end <= limit:
            if self._fire(end, step):
                end += sliding
                continue
            nxt = self._earliest_after(end, limit)
            if nxt is None:
                break
            end = nxt if nxt % sliding == 0 else nxt + (sliding - nxt % sliding)
        self._next_end = end

    def _earliest_after(self, start: float, end: float) -> float | None:
        i = bisect.bisect_right(self._events, (start, _AFTER), key=lambda e: e[:2])
        if i < len(self._events) and self._events[i][0] <= end:
            return self._events[i][0]
        return None

    def _fire(self, ref: float, step: Step) -> bool:
        spec = self.spec
        events = self._events
        k = bisect.bisect_right(events, (ref, _AFTER), key=lambda e: e[:2])
        if spec.length_ms is not None:
            j = bisect.bisect_right(events, (ref - spec.length_ms, _AFTER), key=lambda e: e[:2], hi=k)
        else:
            j = max(0, k - spec.length_count)
        floors = self._floors
        if j:
            if floors:
                for e in events[:j]:
                    floors.pop(e[1], None)
            gone = [e[2] for e in events[:j]]
            del events[:j]
            k -= j
            step.expired.extend(gone)
            self._expired_since.extend(gone)
        window = events[:k]
        if floors:
            window = [e for e in window if floors.get(e[1], ref) <= ref]
        if not window:
            return False
        prev = self._prev
        step.fired.append(Fired([e[2] for e in window], [e[2] for e in window if e[1] not in prev],
                                self._expired_since, None if spec.length_ms is None else ref - spec.length_ms, ref))
        self._prev = {e[1] for e in window}
        self._expired_since = []
        return True

    def snapshot(self, encode) -> list:
        """The manager as plain data (items through `encode`), for a checkpoint; with the items
        that left since the last window (the next window's expired ones)."""
        data = [[[e[0], e[1], encode(e[2])] for e in self._events], self._seq, sorted(self._prev),
                self._since_trigger, self._next_end, None if self._last_counted == -math.inf else self._last_counted,
                [encode(item) for item in self._expired_since]]
        if self._floors:
            data.append(sorted([seq, floor] for seq, floor in self._floors.items()))
        return data

    def restore(self, data: list, decode) -> None:
        """Back to a snapshot (items through `decode`); what it held since is dropped."""
        events, self._seq, prev, self._since_trigger, self._next_end, last, expired, *floors = data
        self._floors = dict(floors[0]) if floors else {}
        self._events = [(ts, seq, decode(item)) for ts, seq, item in events]
        self._prev = set(prev)
        self._last_counted = -math.inf if last is None else last
        self._expired_since = [decode(item) for item in expired]

    def restamp(self, now: float) -> None:
        """Processing time, after a restore: the restored timeline moved so that its newest item
        arrived `now`, the grid of window ends with it. With their old arrival times the first
        trigger after a worker's downtime would expire them without handing them out in any
        window; moved together, each item is in the windows it would have been in (all stamped
        `now`, the items of the window last handed out came round again in the next one: a
        tumbling window counted twice after an exactly-once rollback). And no later than the end
        of the window last handed out: moved past now, what arrives before it would lie in a
        window already handed out, and leave at the next one unseen (a word count's task lost
        what arrived in the first few hundred milliseconds after a rollback)."""
        if not self._events:
            self._next_end = 0.0  # nothing to place: the next tick starts a grid
            return
        newest = self._events[-1][0]
        sliding = self.spec.sliding_ms
        if self._next_end and sliding:
            newest = max(newest, self._next_end - sliding)  # the end of the window last handed out
        delta = now - newest
        self._events = [(ts + delta, seq, item) for ts, seq, item in self._events]
        self._floors = {seq: floor + delta for seq, floor in self._floors.items()}
        if self._next_end:
            self._next_end += delta

    def items(self) -> list:
        """Every item held now, in timestamp order."""
        return [e[2] for e in self._events]
