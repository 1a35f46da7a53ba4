"""Per-task output routes: for each declared stream, the groupers of its subscribers."""

from __future__ import annotations

import random
from typing import Any

from executor.errors import EmitError, InvalidTopologyError
from executor.grouping import (
    AllGrouper,
    CustomGrouper,
    FieldsGrouper,
    GlobalGrouper,
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
                  context: Any, component: str, stream: str, custom: Any = None):
    if g.kind in ("shuffle", "none"):
        return ShuffleGrouper(targets, random.Random())
    if g.kind == "fields":
        return FieldsGrouper(targets, fields, g.fields)
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


def build_routes(topology: StormTopology, layout: TopologyLayout, component: str, task_id: int,
                 local_tasks: set[int], context: Any, copy_custom) -> dict[str, StreamOut]:
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
                                          component, stream, custom))
        routes[stream] = StreamOut(component, stream, sspec.fields, sspec.direct, groupers,
                                   frozenset(direct_tasks))
    return routes
