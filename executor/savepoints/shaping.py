"""A savepoint's state shaped for the code that starts from it (pure): which component's state
goes where (plan.py), keyed state moved key by key to the tasks the fields grouping now picks
(keyed.py), and a windowed bolt's checkpointed windows with it, each tuple following its key
(executor/windowing/rescale.py). Every refusal is a SavepointRefused naming the component."""

from __future__ import annotations

from typing import Any, Callable, Mapping

from executor.checkpoint.protocol import CHECKPOINT_STREAM
from executor.savepoints.keyed import redistribute
from executor.savepoints.plan import Move, SavepointRefused, Shape, keyed_by, plan_moves
from executor.savepoints.store import Manifest, Snapshot
from executor.structure import TopologyStructure
from executor.tuple import Fields
from executor.windowing.spec import WINDOW_KEYS, is_window_conf

# (component, stream) -> its output fields, in the code that starts (where a window's tuples came from)
FieldsOf = Callable[[str, str], Fields]


def shapes_of(structure: TopologyStructure, conf: Mapping[str, Any]) -> dict[str, Shape]:
    """What a topology's components are to a savepoint (tasks as Nimbus lays them out)."""
    cap = conf.get("topology.max.task.parallelism")
    out = {}
    for cid, c in structure.components.items():
        window = {k: c.conf[k] for k in WINDOW_KEYS if c.conf.get(k) is not None} if is_window_conf(c.conf) else None
        out[cid] = Shape(c.kind, c.tasks if cap is None else min(c.tasks, int(cap)),
                         keyed_by([(s.grouping.kind, tuple(s.grouping.fields.to_list()) if s.grouping.fields else None)
                                   for s in c.inputs if s.stream != CHECKPOINT_STREAM]),
                         window)
    return out


def fields_in(structure: TopologyStructure) -> FieldsOf:
    def fields_of(component: str, stream: str) -> Fields:
        try:
            return structure.stream_fields(component, stream)
        except KeyError:
            raise LookupError(f"stream {stream!r} of component {component!r}") from None
    return fields_of


def mixed_hash(conf: Mapping[str, Any]) -> bool:
    return str(conf.get("topology.fields.grouping.hash", "mixed")).lower() != "crc32"


def new_states(snapshot: Snapshot, moves: Mapping[str, Move], old: Mapping[str, Shape], new: Mapping[str, Shape],
               fields_of: FieldsOf, mixed: bool) -> dict[str, list[Mapping[bytes, bytes]]]:
    """Per component of the new topology, its tasks' state (index order)."""
    out: dict[str, list[Mapping[bytes, bytes]]] = {}
    for comp, move in moves.items():
        states = snapshot.states.get(comp) or [{} for _ in range(move.old_tasks)]
        if move.redistributed:
            window = old[comp].window or new[comp].window
            out[comp] = redistribute(comp, new[comp].keyed_by or (), states, move.new_tasks, mixed,
                                     window=window, fields_of=fields_of)
        else:
            out[comp] = list(states)
    return out


def shaped(manifest: Manifest, snapshot: Snapshot, new: Mapping[str, Shape], fields_of: FieldsOf,
           conf: Mapping[str, Any], allow_dropped_state: bool) -> dict[str, list[Mapping[bytes, bytes]]]:
    """The savepoint's state shaped for the new code `new`; SavepointRefused if it cannot be."""
    moves = plan_moves(manifest.components, set(manifest.stateful), new, allow_dropped_state)
    return new_states(snapshot, moves, manifest.components, new, fields_of, mixed_hash(conf))


def check_shapes(manifest: Manifest, snapshot: Snapshot, new: Mapping[str, Shape], fields_of: FieldsOf,
                 conf: Mapping[str, Any], allow_dropped_state: bool) -> None:
    """Refuse (before anything stops) a new code that cannot take this state: shaped() on it."""
    shaped(manifest, snapshot, new, fields_of, conf, allow_dropped_state)


__all__ = ["FieldsOf", "SavepointRefused", "check_shapes", "fields_in", "mixed_hash", "new_states", "shaped",
           "shapes_of"]
