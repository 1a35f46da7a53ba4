"""The worker's build step as pure functions: what a worker runs and where its tuples go.

`plan_executors` turns (structure, conf, layout, this worker's executors) into one plan per
executor; `plan_routing` turns the task -> worker address map of an assignment into this
worker's routing: which tasks are local, and for every remote task the address of the worker
that hosts it. Nothing here touches threads, queues, sockets or user objects, so a worker
process, LocalCluster and the tests all compute the same thing from plain values.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Hashable, Iterable, Mapping, Sequence

from executor.layout import ACKER_COMPONENT, TopologyLayout
from executor.structure import TopologyStructure

Address = Hashable
Executor = tuple[int, int]


@dataclass(frozen=True)
class ExecutorPlan:
    component_id: str
    kind: str                      # "spout", "bolt" or "acker"
    tasks: tuple[int, ...]
    conf: Mapping[str, Any]        # topology conf overlaid with the component's conf
    tick_secs: float | None        # system ticks (spouts/ackers) or user ticks (bolts); None: none
    on_cycle: bool                 # the component lies on a stream cycle

    @property
    def executor_id(self) -> Executor:
        return (self.tasks[0], self.tasks[-1])

    @property
    def tick_tasks(self) -> tuple[int, ...]:
        # Spouts and ackers rotate one pending map per executor: one tick suffices.
        return self.tasks[:1] if self.kind in ("spout", "acker") else self.tasks


@dataclass(frozen=True)
class Routing:
    """Where this worker's tuples go: local tasks, and remote task -> worker address."""

    local_tasks: frozenset[int]
    remote: Mapping[int, Address]

    @property
    def destinations(self) -> tuple[Address, ...]:
        return tuple(sorted(set(self.remote.values()), key=repr))


def component_conf(storm_conf: Mapping[str, Any], structure: TopologyStructure, component: str) -> dict:
    """Topology conf overlaid with the component's own configuration."""
    spec = structure.components.get(component)
    if spec is None or not spec.conf:
        return dict(storm_conf)
    return {**storm_conf, **spec.conf}


def tick_interval(conf: Mapping[str, Any], kind: str, has_ackers: bool) -> float | None:
    """Seconds between ticks for an executor: spouts and ackers rotate their pending maps every
    message timeout; bolts get user ticks at topology.tick.tuple.freq.secs."""
    if kind in ("spout", "acker"):
        if not has_ackers or not conf["topology.enable.message.timeouts"]:
            return None
        return float(conf["topology.message.timeout.secs"])
    freq = conf.get("topology.tick.tuple.freq.secs")
    return float(freq) if freq else None


def executor_kind(structure: TopologyStructure, component: str) -> str:
    return "acker" if component == ACKER_COMPONENT else structure.components[component].kind


def plan_executors(structure: TopologyStructure, conf: Mapping[str, Any], layout: TopologyLayout,
                   executors: Iterable[Executor]) -> list[ExecutorPlan]:
    """One plan per executor of this worker, in task order."""
    has_ackers = bool(layout.acker_tasks)
    plans = []
    for s, e in sorted(executors):
        comp = layout.task_to_component.get(s)
        if comp is None or layout.task_to_component.get(e) != comp:
            raise ValueError(f"executor [{s}-{e}] is not a task range of one component of this topology")
        kind = executor_kind(structure, comp)
        econf = dict(conf) if comp == ACKER_COMPONENT else component_conf(conf, structure, comp)
        plans.append(ExecutorPlan(comp, kind, tuple(range(s, e + 1)), econf,
                                  tick_interval(econf, kind, has_ackers), comp in structure.cycle_members))
    return plans


def thread_groups(plans: Sequence[ExecutorPlan]) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """(shared, dedicated): the indices of the plans whose executors run on the worker's shared
    thread, and of those that each get a thread of their own (`topology.executor.thread.mode`,
    from the topology conf or the component's own; executor/scheduling.py says why)."""
    dedicated = tuple(i for i, p in enumerate(plans)
                      if str(p.conf.get("topology.executor.thread.mode", "shared")).lower() == "dedicated")
    return tuple(i for i in range(len(plans)) if i not in dedicated), dedicated


def plan_routing(layout: TopologyLayout, executors: Iterable[Executor],
                 task_address: Mapping[int, Address], my_address: Address) -> Routing:
    """Local tasks are this worker's executors' tasks; every other task of the topology goes
    to the address the assignment gives it (tasks without one are left out: nothing is sent
    to them until an assignment places them)."""
    local = frozenset(t for s, e in executors for t in range(s, e + 1))
    remote = {t: a for t, a in task_address.items()
              if t not in local and t in layout.task_to_component and a != my_address}
    return Routing(local, remote)


def task_addresses(executor_slots: Mapping[Executor, Any], slot_address) -> dict[int, Address]:
    """task -> address from an assignment's executor -> slot map and a slot -> address function."""
    return {t: slot_address(slot) for (s, e), slot in executor_slots.items() for t in range(s, e + 1)}
