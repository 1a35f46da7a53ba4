"""A windowed bolt's checkpointed windows over a new number of tasks (pure; a savepoint's move
of a stateful windowed bolt to another parallelism, executor/savepoints/keyed.py).

The tuples a window holds arrived by the bolt's fields grouping, so each one belongs to the task
the grouping picks for its key, as the bolt's own state keys do (Flink's keyed windows). Each
old task's snapshot (WindowManager.snapshot) is split item by item into the new tasks' ones: an
item keeps its timestamp, and the items of a new task are renumbered in (timestamp, old task,
old order) order. A new task's next window end is the earliest of those of the old tasks it
takes items from, so no window an item still waits for is skipped; what was already handed out
is not handed out again:
- tumbling windows: the items of the window an old task handed out last (they wait in it only
  to leave at the next one) leave with the next window of their new task;
- event-time sliding windows (their ends on one grid in every task, multiples of the sliding
  interval): an item is in no window ending before its old task's next end (a floor the
  manager keeps for it).

Not split, each refused with a reason (`can_split`): count windows (a count is per task: the 10
tuples a task has seen, which no split of keys keeps), processing-time sliding windows (which
windows a tuple was already in follows its old task's clock), and windows kept in the state
tuple by tuple (with_max_events_in_memory).
"""

from __future__ import annotations

from typing import Any, Callable, Sequence

from executor.windowing.spec import WindowSpec

# WindowManager.snapshot's fields, in order (the floors only in a snapshot that has any)
_EVENTS, _SEQ, _PREV, _SINCE_TRIGGER, _NEXT_END, _LAST_COUNTED, _EXPIRED, _FLOORS = range(8)


def can_split(spec: WindowSpec) -> str | None:
    """None when the windows of `spec` can be split by key; else why not (for the refusal)."""
    if spec.length_count is not None or spec.sliding_count is not None:
        return "its windows are counted in tuples per task, which no split of its keys keeps"
    if spec.max_events_in_memory is not None:
        return "its window keeps its tuples in the state one by one (with_max_events_in_memory)"
    if not spec.event_time and spec.sliding_ms != spec.length_ms:
        return ("its sliding windows run on processing time: the windows a tuple was already in follow "
                "its old task's clock")
    return None


def split(spec: WindowSpec, snapshots: Sequence[list | None], task_of: Callable[[Any], int],
          new_tasks: int) -> list[list | None]:
    """The old tasks' window snapshots (index order; None: nothing kept) as `new_tasks` new ones,
    for windows `can_split` allows. `task_of(item)` is the new task index of an encoded item
    (executor/windowing/adapter.py's [values, source task, stream, component]); it raises
    ValueError for an item it cannot place."""
    tumbling = spec.sliding_ms == spec.length_ms
    events: list[list] = [[] for _ in range(new_tasks)]
    expired: list[list] = [[] for _ in range(new_tasks)]
    ends: list[list[float]] = [[] for _ in range(new_tasks)]
    for old, snap in enumerate(snapshots):
        if not snap:
            continue
        handed_out = set(snap[_PREV])
        end = snap[_NEXT_END]
        floors = dict(snap[_FLOORS]) if len(snap) > _FLOORS else {}
        for item in snap[_EXPIRED]:
            expired[task_of(item)].append(item)
        for ts, seq, item in snap[_EVENTS]:
            j = task_of(item)
            if tumbling and seq in handed_out:
                expired[j].append(item)
                continue
            events[j].append((ts, old, seq, item, seq in handed_out, max(end, floors.get(seq, end))))
            ends[j].append(end)
    out: list[list | None] = []
    for j in range(new_tasks):
        if not events[j] and not expired[j]:
            out.append(None)
            continue
        end = min(ends[j]) if ends[j] else 0.0
        renumbered, prev, floors = [], [], []
        for seq, (ts, _old, _seq, item, was_in_last, floor) in enumerate(sorted(events[j], key=lambda e: e[:3]), 1):
            renumbered.append([ts, seq, item])
            if was_in_last:
                prev.append(seq)
            if floor > end and not tumbling:  # tumbling: what was handed out has left above
                floors.append([seq, floor])
        snap = [renumbered, len(renumbered), prev, 0, end, None, expired[j]]
        out.append([*snap, floors] if floors else snap)
    return out
