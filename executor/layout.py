"""Tasks and executors of a topology: pure computation from the topology and its config.

Task ids are assigned 1..N in component-id order, as Storm does; each component's tasks are
split over its executors as evenly as possible. The acker is the system component __acker.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping

from executor.grouping import split_tasks
from executor.topology import StormTopology

ACKER_COMPONENT = "__acker"


@dataclass(frozen=True)
class TopologyLayout:
    task_to_component: dict[int, str]
    component_tasks: dict[str, list[int]]
    executors: dict[str, list[tuple[int, int]]]

    @property
    def acker_tasks(self) -> list[int]:
        return self.component_tasks.get(ACKER_COMPONENT, [])

    def all_executors(self) -> list[tuple[str, tuple[int, int]]]:
        return sorted(((c, e) for c, es in self.executors.items() for e in es), key=lambda x: x[1])


def num_ackers(conf: Mapping[str, Any], num_workers: int) -> int:
    n = conf.get("topology.acker.executors")
    return num_workers if n is None else int(n)


def compute_layout(topology: StormTopology, conf: Mapping[str, Any], num_workers: int,
                   parallelism: Mapping[str, int] | None = None) -> TopologyLayout:
    """parallelism overrides executor counts (rebalance); executors never exceed tasks."""
    parallelism = dict(parallelism or {})
    cap = conf.get("topology.max.task.parallelism")
    counts: dict[str, tuple[int, int]] = {}  # component -> (tasks, executors)
    for cid, spec in topology.components.items():
        execs = parallelism.get(cid, spec.parallelism)
        tasks = spec.tasks
        if cap is not None:
            execs, tasks = min(execs, cap), min(tasks, cap)
        counts[cid] = (tasks, execs)
    ackers = num_ackers(conf, num_workers)
    if ackers > 0:
        counts[ACKER_COMPONENT] = (ackers, parallelism.get(ACKER_COMPONENT, ackers))
    task_to_component: dict[int, str] = {}
    component_tasks: dict[str, list[int]] = {}
    executors: dict[str, list[tuple[int, int]]] = {}
    next_id = 1
    for cid in sorted(counts):
        tasks, execs = counts[cid]
        ids = list(range(next_id, next_id + tasks))
        next_id += tasks
        component_tasks[cid] = ids
        for t in ids:
            task_to_component[t] = cid
        executors[cid] = split_tasks(ids, execs)
    return TopologyLayout(task_to_component, component_tasks, executors)
