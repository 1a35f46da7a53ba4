"""Keyed state redistributed over a new number of tasks (pure; Flink's key groups): each key
goes to the task the component's fields grouping picks for it, computed by the grouping itself
(executor/grouping.py). A key is the grouped field's value (a list of the values for several
fields). Before moving anything, every key is checked to be where the grouping put it in the
old run: a state keyed by something else cannot be redistributed, and is refused."""

from __future__ import annotations

from typing import Mapping, Sequence

from executor.grouping import FieldsGrouper
from executor.savepoints.plan import SavepointRefused
from executor.state.codec import decode
from executor.tuple import Fields


def key_index(grouper: FieldsGrouper, fields: int, key) -> int:
    """The task index (into 0..n-1) the grouping picks for a state key."""
    values = [key] if fields == 1 else list(key)
    return grouper.choose(values)[0]


def redistribute(component: str, fields: Sequence[str], old: Sequence[Mapping[bytes, bytes]], new_tasks: int,
                 mixed: bool = True) -> list[dict[bytes, bytes]]:
    """The committed values of the `old` tasks (index order; encoded keys -> encoded values),
    regrouped over `new_tasks`. Raises SavepointRefused when a key is not where the grouping put it."""
    group = Fields(list(fields))
    before = FieldsGrouper(range(len(old)), group, group, mixed)
    after = FieldsGrouper(range(new_tasks), group, group, mixed)
    out: list[dict[bytes, bytes]] = [{} for _ in range(new_tasks)]
    for index, values in enumerate(old):
        for raw_key, raw_value in values.items():
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
    return out


def _short(key) -> str:
    text = repr(key)
    return text if len(text) <= 60 else text[:57] + "..."
