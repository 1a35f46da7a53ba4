"""Keyed state redistributed over a new number of tasks (pure; Flink's key groups): each key
goes to the task the component's fields grouping picks for it, computed by the grouping itself
(executor/grouping.py). A key is the grouped field's value (a list of the values for several
fields). Before moving anything, every key is checked to be where the grouping put it in the
old run: a state keyed by something else cannot be redistributed, and is refused. A windowed
bolt's checkpointed windows move the same way, each tuple with its key."""

from __future__ import annotations

from typing import Any, Callable, Mapping, Sequence

import msgpack

from executor.grouping import FieldsGrouper
from executor.savepoints.plan import SavepointRefused
from executor.state.codec import decode
from executor.tuple import Fields
from executor.windowing.adapter import WindowedBoltAdapter

# A stateful windowed bolt's own keys in its state (executor/windowing/adapter.py), as stored
_WINDOW = msgpack.packb(WindowedBoltAdapter.WINDOW_KEY, use_bin_type=True)
_WINDOW_KEYS = frozenset({_WINDOW, msgpack.packb(WindowedBoltAdapter.ORDER_KEY, use_bin_type=True)})


def key_index(grouper: FieldsGrouper, fields: int, key) -> int:
    """The task index (into 0..n-1) the grouping picks for a state key."""
    values = [key] if fields == 1 else list(key)
    return grouper.choose(values)[0]


def redistribute(component: str, fields: Sequence[str], old: Sequence[Mapping[bytes, bytes]], new_tasks: int,
                 mixed: bool = True, window: Mapping[str, Any] | None = None,
                 fields_of: Callable[[str, str], Fields] | None = None) -> list[dict[bytes, bytes]]:
    """The committed values of the `old` tasks (index order; encoded keys -> encoded values),
    regrouped over `new_tasks`. Raises SavepointRefused when a key is not where the grouping put it.
    A windowed bolt's checkpointed windows (its `window` settings; `fields_of(component, stream)`
    the output fields of the streams it takes) are split by the same grouping, tuple by tuple."""
    group = Fields(list(fields))
    before = FieldsGrouper(range(len(old)), group, group, mixed)
    after = FieldsGrouper(range(new_tasks), group, group, mixed)
    out: list[dict[bytes, bytes]] = [{} for _ in range(new_tasks)]
    windows: dict[int, list] = {}
    for index, values in enumerate(old):
        for raw_key, raw_value in values.items():
            if raw_key in _WINDOW_KEYS:
                if raw_key != _WINDOW:
                    raise SavepointRefused(f"bolt {component!r}: its window keeps its tuples in the state one by "
                                           f"one (with_max_events_in_memory), which cannot be split over "
                                           f"{new_tasks} tasks; keep its parallelism")
                windows[index] = decode(raw_value)
                continue
            key = decode(raw_key)
            try:
                picked = key_index(before, len(fields), key)
            except Exception:
                picked = None
            if picked != index:
                raise SavepointRefused(
                    f"bolt {component!r}: its state key {_short(key)} is on task index {index}, but its fields "
                    f"grouping on {', '.join(fields)} puts that key on {picked}: its state is not keyed by the "
                    f"grouped fields and cannot be redistributed; keep its parallelism")
            out[key_index(after, len(fields), key)][raw_key] = raw_value
    if windows:
        for index, snap in enumerate(_split_windows(component, group, windows, len(old), new_tasks, mixed,
                                                    window, fields_of)):
            if snap is not None:
                out[index][_WINDOW] = msgpack.packb(snap, use_bin_type=True)
    return out


def _split_windows(component: str, group: Fields, windows: Mapping[int, list], old_tasks: int, new_tasks: int,
                   mixed: bool, window: Mapping[str, Any] | None, fields_of) -> list:
    from executor.windowing.rescale import can_split, split
    from executor.windowing.spec import window_spec

    if not window or fields_of is None:
        raise SavepointRefused(f"bolt {component!r}: its state holds windows, but the savepoint does not say how "
                               f"they are cut; keep its parallelism")
    spec = window_spec(component, window)
    why = can_split(spec)
    if why:
        raise SavepointRefused(f"bolt {component!r}: its windows cannot be split over {new_tasks} tasks: {why}; "
                               f"keep its parallelism")
    groupers: dict[tuple[str, str], FieldsGrouper] = {}

    def task_of(item) -> int:
        values, _task, stream, source = item
        grouper = groupers.get((source, stream))
        if grouper is None:
            try:
                names = fields_of(source, stream)
                grouper = groupers[(source, stream)] = FieldsGrouper(range(new_tasks), names, group, mixed)
            except (LookupError, ValueError):
                raise SavepointRefused(
                    f"bolt {component!r}: its window holds tuples of stream {stream!r} of {source!r}, which the new "
                    f"topology does not send it with the fields {', '.join(group)}; keep its parallelism") from None
        return grouper.choose(values)[0]

    return split(spec, [windows.get(i) for i in range(old_tasks)], task_of, new_tasks)


def _short(key) -> str:
    text = repr(key)
    return text if len(text) <= 60 else text[:57] + "..."
