"""TopologyContext: what a task knows about itself and the topology."""

from __future__ import annotations

from typing import Any

from executor.layout import TopologyLayout
from executor.topology import StormTopology
from executor.tuple import Fields


class TopologyContext:
    def __init__(self, storm_id: str, topology: StormTopology, layout: TopologyLayout, task_id: int,
                 worker_port: int | None = None, worker_tasks: list[int] | None = None):
        self.storm_id = storm_id
        self.topology = topology
        self._layout = layout
        self.this_task_id = task_id
        self.this_component_id = layout.task_to_component[task_id]
        self.this_worker_port = worker_port
        self.this_worker_tasks = list(worker_tasks or [])
        self._shared: dict[str, Any] = {}

    def component_tasks(self, component_id: str) -> list[int]:
        return list(self._layout.component_tasks.get(component_id, []))

    def component_id(self, task_id: int) -> str:
        return self._layout.task_to_component[task_id]

    def component_output_fields(self, component_id: str, stream: str = "default") -> Fields:
        return self.topology.stream_fields(component_id, stream)

    @property
    def this_task_index(self) -> int:
        return self.component_tasks(self.this_component_id).index(self.this_task_id)

    @property
    def this_component_tasks(self) -> list[int]:
        return self.component_tasks(self.this_component_id)

    def __repr__(self) -> str:
        return f"TopologyContext({self.storm_id!r}, {self.this_component_id!r}, task={self.this_task_id})"
