"""Per-task output routes: for each declared stream, the groupers of its subscribers."""

from __future__ import annotations

import random
from typing import Any, Callable

from executor.errors import EmitError, InvalidTopologyError
from executor.grouping import (
    AllGrouper,
    CustomGrouper,
    FieldsGrouper,
    GlobalGrouper,
    LocalityAwareShuffleGrouper,
    LocalOrShuffleGrouper,
    PartialKeyGrouper,
    ShuffleGrouper,
)
from executor.layout import TopologyLayout
from executor.topology import Grouping, StormTopology
from executor.tuple import Fields


class StreamOut:
    """Where one task's tuples on one stream go."""

    __slots__ = ("component", "stream", "fields", "n", "direct", "_groupers", "_single", "direct_tasks",
                 "targets", "counts")

    def __init__(self, component: str, stream: str, fields: Fields, direct: bool, groupers: list,
                 direct_tasks: frozenset[int]):
        self.component = component
        self.stream = stream
        self.fields = fields
        self.n = len(fields)
        self.direct = direct
        self._groupers = groupers
        self._single = groupers[0] if len(groupers) == 1 else None
        self.direct_tasks = direct_tasks
        # [emitted, transferred] on this stream (the executor's stats: executor/stats.py)
        self.counts = [0, 0]
        # targets(values) -> task ids; bound straight to the grouper in the common one-subscriber case
        self.targets = self._single.choose if self._single is not None else self._all_targets

    def _all_targets(self, values) -> list[int]:
        if not self._groupers:
            return []
        out: list[int] = []
        for g in self._groupers:
            out.extend(g.choose(values))
        return out

    def direct_target(self, task: int) -> list[int]:
        if task in self.direct_tasks:
            return [task]
        raise EmitError(
            f"component {self.component!r}: emit_direct to task {task} on stream {self.stream!r}, but that task "
            f"does not subscribe to the stream with a direct grouping (subscribed tasks: {sorted(self.direct_tasks)})")


def _make_grouper(g: Grouping, targets: list[int], fields: Fields, task_id: int, local_tasks: set[int],
                  context: Any, component: str, stream: str, custom: Any = None, locality: Locality | None = None,
                  mixed_fields_hash: bool = True):
    if g.kind in ("shuffle", "none"):
        local = [t for t in targets if t in local_tasks]
        if locality is not None and local and len(local) < len(targets):
            return LocalityAwareShuffleGrouper(targets, local_tasks, locality.load, locality.higher,
                                               locality.lower, random.Random())
        return ShuffleGrouper(targets, random.Random())
    if g.kind == "fields":
        return FieldsGrouper(targets, fields, g.fields, mixed_fields_hash)
    if g.kind == "partial_key":
        return PartialKeyGrouper(targets, fields, g.fields)
    if g.kind == "all":
        return AllGrouper(targets)
    if g.kind == "global":
        return GlobalGrouper(targets)
    if g.kind == "local_or_shuffle":
        return LocalOrShuffleGrouper(targets, local_tasks, random.Random())
    if g.kind == "custom":
        user = custom
        prepare = getattr(user, "prepare", None)
        if callable(prepare):
            prepare(context, stream, list(targets))
        allowed = frozenset(targets)

        def validate(chosen: list) -> list:
            for t in chosen:
                if t not in allowed:
                    raise EmitError(
                        f"component {component!r} stream {stream!r}: custom grouping chose task {t!r}, "
                        f"not one of the subscriber's tasks {sorted(allowed)}")
            return chosen

        return CustomGrouper(user, targets, task_id, validate)
    raise InvalidTopologyError(f"unknown grouping {g.kind!r}")


class Locality:
    """What a shuffle grouping needs to prefer the worker's own tasks (LocalityAwareShuffleGrouper):
    the load of a local task and the bounds, from the topology conf."""

    __slots__ = ("load", "higher", "lower")

    def __init__(self, load: Callable[[int], float], higher: float, lower: float):
        self.load = load
        self.higher = higher
        self.lower = lower

    @classmethod
    def from_conf(cls, conf: dict, load: Callable[[int], float]) -> "Locality | None":
        """None when topology.disable.loadaware.messaging is set (plain shuffles, as Storm's)."""
        if conf.get("topology.disable.loadaware.messaging"):
            return None
        # .get: a topology submitted before these keys existed runs with Storm's defaults
        return cls(load, float(conf.get("topology.localityaware.higher.bound", 0.8)),
                   float(conf.get("topology.localityaware.lower.bound", 0.2)))


def build_routes(topology: StormTopology, layout: TopologyLayout, component: str, task_id: int,
                 local_tasks: set[int], context: Any, copy_custom,
                 locality: Locality | None = None, mixed_fields_hash: bool = True) -> dict[str, StreamOut]:
    """`mixed_fields_hash`: False for `topology.fields.grouping.hash: crc32` (executor/grouping.py)."""
    spec = topology.components[component]
    routes: dict[str, StreamOut] = {}
    for stream, sspec in spec.streams.items():
        groupers = []
        direct_tasks: set[int] = set()
        for target, grouping, index in topology.structure.subscriptions(component, stream):
            targets = layout.component_tasks.get(target, [])
            if not targets:
                continue
            if grouping.kind == "direct":
                direct_tasks.update(targets)
                continue
            custom = None
            if grouping.kind == "custom":
                custom = copy_custom(topology.custom_groupings[(target, index)])
            groupers.append(_make_grouper(grouping, targets, sspec.fields, task_id, local_tasks, context,
                                          component, stream, custom, locality, mixed_fields_hash))
        routes[stream] = StreamOut(component, stream, sspec.fields, sspec.direct, groupers,
                                   frozenset(direct_tasks))
    return routes
