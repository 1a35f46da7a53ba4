"""What a savepoint's state may become in a topology (pure): each component's state goes to the
component of the same name; with the same number of tasks task by task, with another number only
when it is keyed by a fields grouping (redistributed key by key, keyed.py). Everything else is
refused with one line naming the component, before anything is stopped."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping

from executor.checkpoint.protocol import CHECKPOINT_COMPONENT


class SavepointRefused(Exception):
    """A swap or a start from a savepoint that cannot keep its state: one line, nothing changed."""

    rpc_kind = "illegal-state"  # from Nimbus, the client's one error line


@dataclass(frozen=True)
class Shape:
    """What a savepoint or a topology says of one component."""

    kind: str                               # "spout" or "bolt"
    tasks: int
    keyed_by: tuple[str, ...] | None = None  # the fields every input is fields-grouped on, if one set
    # a windowed bolt's window settings (its conf's topology.bolts.* keys): how its checkpointed
    # windows split over another parallelism (executor/windowing/rescale.py)
    window: Mapping[str, Any] | None = None


@dataclass(frozen=True)
class Move:
    component: str
    old_tasks: int
    new_tasks: int

    @property
    def redistributed(self) -> bool:
        return self.old_tasks != self.new_tasks


def keyed_by(groupings: list[tuple[str, tuple[str, ...] | None]]) -> tuple[str, ...] | None:
    """The fields a component's data inputs are all grouped on ((kind, fields) per input,
    `$checkpoint` left out), or None when any input is grouped otherwise or on other fields."""
    fields = {f for kind, f in groupings if kind == "fields"}
    if not groupings or len(fields) != 1 or any(kind != "fields" for kind, _f in groupings):
        return None
    return fields.pop()


def plan_moves(saved: Mapping[str, Shape], stateful: set[str], new: Mapping[str, Shape],
               allow_dropped_state: bool = False) -> dict[str, Move]:
    """The moves of the components in `stateful` (those whose tasks hold state in the savepoint)
    into `new`; raises SavepointRefused naming the first component that cannot keep its state."""
    moves: dict[str, Move] = {}
    for comp in sorted(stateful):
        if comp == CHECKPOINT_COMPONENT:
            continue  # its record is written afresh (store.py)
        old = saved[comp]
        target = new.get(comp)
        if target is None:
            if allow_dropped_state:
                continue
            raise SavepointRefused(
                f"component {comp!r} has state in the savepoint and is not in the new topology (renamed or "
                f"removed?); --allow-dropped-state starts without it")
        if target.kind != old.kind:
            raise SavepointRefused(f"component {comp!r} was a {old.kind} and is a {target.kind} in the new "
                                   f"topology: its state cannot carry over")
        if target.tasks != old.tasks:
            if old.kind == "spout":
                raise SavepointRefused(
                    f"spout {comp!r}: its read positions cannot be split over {target.tasks} tasks instead of "
                    f"{old.tasks}; keep its parallelism")
            if target.keyed_by is None:
                raise SavepointRefused(
                    f"bolt {comp!r}: its state cannot be redistributed from {old.tasks} tasks to {target.tasks}: "
                    f"not all its inputs are fields-grouped on the same fields; keep its parallelism")
            if old.keyed_by is None:
                raise SavepointRefused(
                    f"bolt {comp!r}: its state cannot be redistributed from {old.tasks} tasks to {target.tasks}: "
                    f"in the savepoint's topology its inputs were not all fields-grouped on the same fields")
        moves[comp] = Move(comp, old.tasks, target.tasks)
    return moves
